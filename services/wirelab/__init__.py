"""wirelab: REST and gRPC on one contract, measured the same way."""

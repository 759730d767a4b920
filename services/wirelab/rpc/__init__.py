"""The gRPC service: grpc.aio (default) or thread-pool server over the shared core."""

"""Generated from proto/wirelab/v1/wirelab.proto by `make proto`; never edit by hand."""

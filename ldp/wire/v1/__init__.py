"""Generated protobuf/gRPC code for the ldp wire protocol v1 (``make proto`` regenerates it)."""

"""The generated protobuf and gRPC modules of api/ternpb/tern.proto (gen.sh)."""

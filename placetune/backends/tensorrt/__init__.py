"""The TensorRT backend: an isolated worker process builds and times engines (TensorRT imported only there)."""

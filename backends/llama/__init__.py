"""The embedded llama.cpp engine: model files, loading, the batched decode loop and its jobs."""

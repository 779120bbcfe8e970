"""What runs inside an engine worker process: the llama.cpp backends, the batched engine and its jobs, sampling,
speculative decoding, the grammar process, and the worker's own main loop."""

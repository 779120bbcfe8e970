"""LLM backends: the protocol, the llama.cpp engine and a scripted fake for tests."""

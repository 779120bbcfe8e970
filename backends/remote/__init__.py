"""OpenAI-compatible remote servers: the HTTP client, capabilities, request bodies, the backend."""

"""Workflows and local model files served as OpenAI-compatible models (the /v1 routes of `metagen serve` and
of the studio's own server)."""

"""Tool calls: the request's tools, the calls a model answered, and how they are rendered, parsed and constrained."""

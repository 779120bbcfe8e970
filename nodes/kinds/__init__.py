"""Node kinds: one module per family of kinds, each a NodeKind class with its schema and `run`."""

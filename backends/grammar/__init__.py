"""Pure-Python checkers for GBNF grammars and JSON schemas (before llama.cpp sees them)."""

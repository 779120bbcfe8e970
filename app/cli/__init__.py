"""The `metagen` command line: the entry point and one module per command group."""

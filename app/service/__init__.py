"""The studio service the UI and CLI call, and the catalog of model files."""

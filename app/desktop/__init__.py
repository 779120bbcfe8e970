"""The desktop app: the native window and the one-instance-per-data-dir lock."""

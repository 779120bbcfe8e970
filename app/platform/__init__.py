"""The machine around the app: data paths, packaged resources, settings, atomic file writes."""

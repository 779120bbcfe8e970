"""Node kinds of this module are being written (issue 4); the registry imports it."""

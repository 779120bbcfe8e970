"""Workflows as data: the YAML model, validation, problems, model specs and workflow files."""

"""The trace database's schema version, in a module of its own so readers without the ORM (versions) can check it."""

SCHEMA_VERSION = 1
"""Bump with a migration in app/traces/db.py whenever a table or column changes."""

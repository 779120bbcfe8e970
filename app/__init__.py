"""Metagen Studio application: workflow model, validation, scheduler, traces, CLI and UI."""

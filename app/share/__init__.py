"""Shared use: the share policy, the run gate and deep links."""

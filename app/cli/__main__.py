"""`python -m app.cli`: the same as the `metagen` command."""

from app.cli.main import entry

entry()

"""Exit codes of every `metagen` command: 0 success, 1 the run failed, 2 the input is invalid."""

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

"""Running a workflow: the scheduler, its events and the live-run observer."""

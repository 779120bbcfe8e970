"""`metagen tune`: which strategy, with which compute, for this dataset, model and budget (raced on dev, reported on
held-out test)."""

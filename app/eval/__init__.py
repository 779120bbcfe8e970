"""Evaluation: run workflows over a dataset, sweep their compute, grade and summarise (metagen eval)."""

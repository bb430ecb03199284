"""Projections: tiers of memory derived from the log by deterministic folds, each checkpointed
with its output and rebuildable from the log."""

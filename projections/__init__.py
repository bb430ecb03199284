"""Projections: tiers of memory derived from the log by deterministic folds, each checkpointed
with its output and rebuildable from the log."""

AIRSSPEC_LAYER = True  # lets `import airsspec` tell this package from a namesake on the index

"""Run model, per-year writers/readers, TREC run, validator."""

"""Offline studies of pipeline parts over real topics (context selection, persona extraction): they run stages and
score them with the evaluation, so they sit above both ``pipelines`` and ``evaluate``."""

"""Conversational pipelines (RtG, GtR, manual) as configured lists of stages over turn records."""

from ikatkit.pipelines.config import RunConfig, load_config
from ikatkit.pipelines.runner import RunOutcome, run_pipeline

__all__ = ["RunConfig", "RunOutcome", "load_config", "run_pipeline"]

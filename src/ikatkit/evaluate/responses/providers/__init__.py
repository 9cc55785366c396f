"""Measure providers, one per kind of evidence (one file each), registered on import: see :mod:`.base`."""

from ikatkit.evaluate.responses.providers import (length, nuggets, passages, references, rubrics,  # noqa: F401
                                                  simulator)
from ikatkit.evaluate.responses.providers.base import (PROVIDERS, Context, Provider, ResponseScorers, Scored,
                                                       register)

__all__ = ["PROVIDERS", "Context", "Provider", "ResponseScorers", "Scored", "register"]

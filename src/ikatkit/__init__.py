"""ikatkit: build indexes, run conversational pipelines, write, validate and evaluate TREC iKAT runs."""

__version__ = "0.1.0"

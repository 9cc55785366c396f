"""Evaluation with ir-measures: passage rankings and PTKB rankings, comparison, significance, plots."""

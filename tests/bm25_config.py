"""The manual-like run config without a model that several test files run: resolved utterance, gold PTKB, BM25
top-20, the top passage as the response."""

BM25_EXTRACTIVE = """
name = "bm25-extractive"
run_type = "manual"
batch_size = 4

[resources.bm25]
kind = "bm25"

[[stages]]
stage = "manual_query"

[[stages]]
stage = "gold_ptkb"

[[stages]]
stage = "retrieve"
k = 20
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
"""

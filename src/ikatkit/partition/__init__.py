"""Partitioned indexes and partition selection (M-RAG, issue 19)."""

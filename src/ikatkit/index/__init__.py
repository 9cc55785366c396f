"""Lucene indexes: building (Anserini), manifest, stats and passage lookup."""

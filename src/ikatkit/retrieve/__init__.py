"""BM25 (+RM3) retrieval over our Lucene indexes, and rank fusion."""

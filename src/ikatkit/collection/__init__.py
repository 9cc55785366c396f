"""Collection readers (ClueWeb22, passage JSONL, TrecWeb, TREC CAR, MS MARCO TSV) and the iKAT segmenter."""

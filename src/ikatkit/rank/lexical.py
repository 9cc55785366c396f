"""A lexical scorer: TF-IDF cosine of two texts over the statistics of the Lucene index being searched.

Texts are analysed by Anserini's default English analyzer (Pyserini's ``get_lucene_analyzer()``: the
tokens, stop words and Porter stems BM25 matches on), a term weighs ``(1 + ln tf) * idf`` with
``idf = ln((1 + N) / (1 + df)) + 1`` (scikit-learn's ``TfidfVectorizer(sublinear_tf=True)``; ``df`` and
``N`` from the index, so a term the index lacks weighs the most), and the score is the cosine of the two
weight vectors: in [0, 1], 0 when the texts share no term. Exact and deterministic; no model.

The tokens of a batch of new texts and the document frequencies of their new terms come from Lucene in one
call each (``TermStats.java``, compiled with the other Java helpers); without a JDK, from Pyserini's analyzer and one
``docFreq`` call per term (the same values, slower).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ikatkit.rank.base import RankerBase

FIELD = "contents"  # the field ``ikatkit index build`` indexes (and BM25 searches)


class TfidfCosine(RankerBase):
    """``score(pairs)``: the TF-IDF cosine of each ``(query, text)`` pair, document frequencies from ``index``.

    Each text's vector is computed once (a conversation's texts are scored again turn after turn)."""

    model_name = "tfidf-cosine"

    def __init__(self, index: str | Path) -> None:
        from ikatkit.index.lucene import check_index
        from ikatkit.java import autoclass, import_pyserini

        super().__init__(cache=True)
        index = check_index(index)
        analysis = import_pyserini("pyserini.analysis")
        from jnius import JavaException  # only once our JVM runs: importing jnius first would start a bare one

        self.analyzer = analysis.get_lucene_analyzer()
        self.reader = import_pyserini("pyserini.index.lucene").LuceneIndexReader(str(index)).reader
        self.documents = self.reader.numDocs()
        try:
            self._java = autoclass("ikatkit.TermStats")
        except JavaException:  # no JDK compiled the helper
            self._java = None
            self._tokens, self._term = analysis.Analyzer(self.analyzer), autoclass("org.apache.lucene.index.Term")
        self._idf: dict[str, float] = {}
        self._vectors: dict[str, dict[str, float]] = {}

    def tokens(self, texts: list[str]) -> list[list[str]]:
        """The analysed tokens of each text, in order (one Java call for all)."""
        if self._java is not None:
            return [joined.split() for joined in self._java.analyzeAll(self.analyzer, FIELD, texts)]
        return [self._tokens.analyze(text) for text in texts]

    def idf(self, terms: Iterable[str]) -> dict[str, float]:
        """``ln((1 + N) / (1 + df)) + 1`` by term, at least for ``terms`` (analysed; each looked up once)."""
        new = [t for t in terms if t not in self._idf]
        if new:
            dfs = self._java.docFreqs(self.reader, FIELD, new) if self._java is not None else \
                [self.reader.docFreq(self._term(FIELD, t)) for t in new]
            top = math.log(1 + self.documents) + 1
            self._idf.update((t, top - math.log(1 + df)) for t, df in zip(new, dfs))
        return self._idf

    def vectors(self, texts: Iterable[str]) -> list[dict[str, float]]:
        """The unit-length TF-IDF vector of each text (empty when it has no term); new texts are analysed and
        their new terms' document frequencies looked up in one call each."""
        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            counts = [Counter(tokens) for tokens in self.tokens(new)]
            idf = self.idf(set().union(*counts))
            for text, count in zip(new, counts):
                terms = list(count)
                weights = [(1 + math.log(tf)) * idf[t] for t, tf in count.items()]
                norm = math.sqrt(sum(w * w for w in weights))
                self._vectors[text] = dict(zip(terms, [w / norm for w in weights])) if norm else {}
        return [self._vectors[text] for text in texts]

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        self.vectors(text for pair in pairs for text in pair)
        scores = []
        for query, text in pairs:
            a, b = self._vectors[query], self._vectors[text]
            if len(a) > len(b):
                a, b = b, a
            scores.append(sum(w * b[t] for t, w in a.items() if t in b))
        return scores

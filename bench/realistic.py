"""Synthetic passage collections with the term statistics of real iKAT text, at any size (issue 41).

Fitted once to the 894 real ClueWeb22-B passages of iKAT 2023 (``$IKAT_DATA/2023/*_provenance_passages.jsonl``,
tokens ``[a-z0-9]+`` of the lower-cased text, stop words kept: the analyzer drops them as it does real ones):

- **terms**: the real words whose count is at least ``HEAD_MIN`` keep their real probabilities (the head); the rest
  of the probability mass goes to a Zipf tail ``p(r) ~ r^-s`` past the head, its exponent ``s`` solved per size so
  that the expected number of distinct words drawn is what Heaps' law ``V = K T^beta`` (K, beta fitted on the real
  passages) gives for the collection's token count T. Tail words are made up (``q...x``: no English word, unchanged
  by the Porter stemmer);
- **burstiness**: a token repeats an earlier token of its own passage with the probability that makes the share of
  repeated tokens within a passage that of the real passages (``copy``), so document frequencies are not those of
  independent draws;
- **lengths**: drawn from the real passages' token counts;
- **queries**: a real 2023 rewrite (``resolved_utterance``) drawn at random, its non-stop-word terms (3-10 of them,
  mixed frequency as real ones are); a term the real passages lack becomes a tail word of log-uniform rank, as an
  unseen word is rare in a large collection.

``python bench/realistic.py`` prints the fit and the check on a generated sample (observed Zipf exponent and
vocabulary against Heaps' prediction).
"""

from __future__ import annotations

import bz2
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

IKAT_2023 = Path(os.environ.get("IKAT_DATA", Path(__file__).resolve().parents[2] / "shared" / "ikat")) / "2023"
TOKEN = re.compile(r"[a-z0-9]+")
HEAD_MIN = 3  # a real word seen this often keeps its own probability
PASSAGES_PER_DOC = 10
TAIL_ROOM = 4  # the tail holds this many times the words Heaps' law expects to be seen
# Lucene's English stop words (Anserini's analyzer drops them), as ikatkit.llm.guards.LUCENE_STOP_WORDS
STOP = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then there "
                 "these they this to was will with".split())
CONSONANTS, VOWELS = "bdfghjklmnprstvz", "aeiou"


@dataclass(frozen=True)
class Fit:
    """The real passages' statistics the generator follows."""

    words: tuple[str, ...]  # the head, by decreasing count
    head_p: np.ndarray  # their probabilities
    zipf_s: float  # rank-frequency exponent of the real head (ranks 10-1000), for the record
    heaps_k: float
    heaps_beta: float
    copy: float  # probability that a token repeats an earlier one of its passage
    lengths: np.ndarray  # real passages' token counts
    queries: tuple[tuple[str, ...], ...]  # real rewrites' non-stop terms

    def vocabulary(self, tokens: int) -> int:
        """Heaps' law: distinct words in a collection of ``tokens`` tokens."""
        return max(len(self.words) + 1, int(self.heaps_k * tokens ** self.heaps_beta))


def _passages() -> list[list[str]]:
    found = []
    for name in ("test_provenance_passages.jsonl", "train_provenance_passages.jsonl"):
        with open(IKAT_2023 / name, encoding="utf-8") as handle:
            found += [TOKEN.findall(json.loads(line)["passage_text"].lower()) for line in handle if line.strip()]
    return found


def fit_zipf(counts: np.ndarray, low: int = 10, high: int = 1000) -> float:
    """The exponent s of ``count ~ rank^-s`` (least squares in log-log) over ranks ``low..high``."""
    ranked = np.sort(counts)[::-1][low - 1:high]
    ranks = np.arange(low, low + len(ranked))
    return float(-np.polyfit(np.log(ranks), np.log(ranked), 1)[0])


def fit_heaps(tokens: list[str]) -> tuple[float, float]:
    """(K, beta) of ``V = K T^beta`` over the prefixes of ``tokens`` (least squares in log-log, T >= 1000)."""
    seen: set[str] = set()
    points = []
    marks = set(np.unique(np.geomspace(1000, len(tokens), 30).astype(int)))
    for t, word in enumerate(tokens, 1):
        seen.add(word)
        if t in marks:
            points.append((t, len(seen)))
    t, v = np.log(np.array(points, dtype=float)).T
    beta, log_k = np.polyfit(t, v, 1)
    return float(np.exp(log_k)), float(beta)


def repeat_share(passages: list[list[str]]) -> float:
    """Share of tokens that repeat an earlier token of the same passage."""
    repeats = sum(len(p) - len(set(p)) for p in passages)
    return repeats / max(1, sum(map(len, passages)))


@lru_cache(maxsize=1)
def fit() -> Fit:
    """The statistics of the 894 real passages and the 2023 rewrites."""
    passages = _passages()
    tokens = [w for p in passages for w in p]
    counts = Counter(tokens)
    head = [(w, c) for w, c in counts.most_common() if c >= HEAD_MIN]
    k, beta = fit_heaps(list(np.random.default_rng(0).permutation(np.array(tokens, dtype=object))))
    # the copy probability q: real repeat share r = iid share r0 + q (1 - r0), r0 from the same tokens shuffled
    rng = np.random.default_rng(0)
    shuffled = list(rng.permutation(np.array(tokens, dtype=object)))
    cuts = np.cumsum([len(p) for p in passages])[:-1]
    iid = repeat_share([list(part) for part in np.split(np.array(shuffled, dtype=object), cuts)])
    copy = max(0.0, (repeat_share(passages) - iid) / (1 - iid))
    queries = []
    for name in ("test_topics.json", "train_topics.json"):
        for topic in json.loads((IKAT_2023 / name).read_text(encoding="utf-8")):
            for turn in topic["turns"]:
                terms = tuple(w for w in TOKEN.findall(turn.get("resolved_utterance", "").lower()) if w not in STOP)
                if 3 <= len(terms) <= 10:
                    queries.append(terms)
    total = len(tokens)
    return Fit(words=tuple(w for w, _ in head), head_p=np.array([c / total for _, c in head]),
               zipf_s=fit_zipf(np.array(list(counts.values()))), heaps_k=k, heaps_beta=beta, copy=copy,
               lengths=np.array([len(p) for p in passages]), queries=tuple(queries))


def tail_word(rank: int) -> str:
    """A made-up word for a tail rank (``q`` + consonant-vowel syllables + ``x``)."""
    syllables = []
    rank += 1
    while rank:
        rank, digit = divmod(rank - 1, len(CONSONANTS) * len(VOWELS))
        syllables.append(CONSONANTS[digit // len(VOWELS)] + VOWELS[digit % len(VOWELS)])
    return "q" + "".join(syllables) + "x"


class Generator:
    """Passages and queries of a realistic collection of ``passages`` passages, from ``seed``."""

    def __init__(self, passages: int, seed: int = 0) -> None:
        self.fit = f = fit()
        self.passages, self.seed = passages, seed
        self.tokens = int(passages * f.lengths.mean())
        self.vocabulary = f.vocabulary(self.tokens)  # Heaps' law: the distinct words to be seen
        self.tail_s = self._tail_exponent()
        self.cdf = np.cumsum(self._probabilities(self.tail_s))
        self.cdf /= self.cdf[-1]
        self._words: dict[int, str] = dict(enumerate(f.words))

    def _probabilities(self, s: float) -> np.ndarray:
        """Head as the real words, then a Zipf tail of exponent ``s`` over ``TAIL_ROOM`` times Heaps' vocabulary."""
        head = len(self.fit.words)
        tail = (np.arange(head + 1, TAIL_ROOM * self.vocabulary + 1, dtype=float) / head) ** -s
        return np.concatenate([self.fit.head_p, tail * (1 - self.fit.head_p.sum()) / tail.sum()])

    def _tail_exponent(self) -> float:
        """The tail exponent whose draws show Heaps' vocabulary: expected distinct words ``sum(1 - exp(-T p))``
        over the independent draws (those not copies) equal to ``vocabulary``, by bisection."""
        draws = self.tokens * (1 - self.fit.copy)
        low, high = 0.5, 4.0
        for _ in range(30):
            middle = (low + high) / 2
            seen = float(np.sum(-np.expm1(-draws * self._probabilities(middle))))
            low, high = (middle, high) if seen > self.vocabulary else (low, middle)
        return (low + high) / 2

    def word(self, term: int) -> str:
        if term not in self._words:
            self._words[term] = tail_word(term - len(self.fit.words))
        return self._words[term]

    def _vocab_array(self, terms: np.ndarray) -> dict[int, str]:
        return {int(t): self.word(int(t)) for t in np.unique(terms)}

    def chunks(self, size: int = 50000) -> Iterator[list[tuple[str, str]]]:
        """``[(passage id, text), ...]`` in id order (documents of ``PASSAGES_PER_DOC`` passages), ``size`` at a
        time."""
        rng = np.random.default_rng(self.seed)
        for start in range(0, self.passages, size):
            n = min(size, self.passages - start)
            lengths = rng.choice(self.fit.lengths, n)
            ends = np.cumsum(lengths)
            starts = ends - lengths
            terms = np.searchsorted(self.cdf, rng.random(int(ends[-1])), side="right")
            # burstiness: a token copies an earlier token of its passage (pointer jumping resolves chains)
            owner_start = np.repeat(starts, lengths)
            position = np.arange(len(terms))
            copied = (rng.random(len(terms)) < self.fit.copy) & (position > owner_start)
            source = position.copy()
            span = position[copied] - owner_start[copied]
            source[copied] = owner_start[copied] + (rng.random(int(copied.sum())) * span).astype(np.int64)
            while True:
                nxt = source[source]
                if np.array_equal(nxt, source):
                    break
                source = nxt
            terms = terms[source]
            words = self._vocab_array(terms)
            lookup = np.empty(int(terms.max()) + 1, dtype=object)
            for t, w in words.items():
                lookup[t] = w
            texts = lookup[terms]
            chunk = []
            for i in range(n):
                number = start + i
                pid = f"{doc_id(number // PASSAGES_PER_DOC)}:{number % PASSAGES_PER_DOC}"
                chunk.append((pid, " ".join(texts[starts[i]:ends[i]])))
            yield chunk

    def queries(self, count: int, seed: int = 1) -> list[str]:
        """``count`` queries drawn from the real rewrites: head terms as they are, unseen terms as tail words of
        log-uniform rank in this collection's vocabulary."""
        rng = np.random.default_rng(seed)
        known = set(self.fit.words)
        low, high = np.log(len(self.fit.words) + 1), np.log(self.vocabulary)
        found = []
        for pick in rng.integers(0, len(self.fit.queries), count):
            terms = [w if w in known else self.word(int(np.exp(rng.uniform(low, high))))
                     for w in self.fit.queries[pick]]
            found.append(" ".join(terms))
        return found


def doc_id(number: int) -> str:
    """A ClueWeb22-style document id; increasing numbers give increasing ids."""
    return f"clueweb22-en{number // 10000000:04d}-{(number // 100000) % 100:02d}-{number % 100000:05d}"


def write(folder: Path, passages: int, seed: int = 0) -> dict[str, object]:
    """``folder/passages/passages.jsonl`` (one ``{"id", "contents"}`` per line: the folder is an Anserini
    JsonCollection) and the organizers'-style ``folder/hashes.tsv`` and ``hashes.tsv.bz2`` of every passage (sorted
    by doc id, passage number). What was written."""
    (folder / "passages").mkdir(parents=True, exist_ok=True)
    generator = Generator(passages, seed)
    tokens = 0
    with open(folder / "passages" / "passages.jsonl", "w", encoding="utf-8") as out, \
            open(folder / "hashes.tsv", "w", encoding="utf-8") as plain, \
            bz2.open(folder / "hashes.tsv.bz2", "wt", encoding="utf-8") as packed:
        for chunk in generator.chunks():
            lines, hash_lines = [], []
            for pid, text in chunk:
                lines.append(json.dumps({"id": pid, "contents": text}))
                doc, number = pid.rsplit(":", 1)
                hash_lines.append(f"{doc}\t{number}\t{hashlib.md5(text.encode()).hexdigest()}")
                tokens += text.count(" ") + 1
            out.write("\n".join(lines) + "\n")
            plain.write("\n".join(hash_lines) + "\n")
            packed.write("\n".join(hash_lines) + "\n")
    return {"passages": passages, "tokens": tokens, "vocabulary_heaps": generator.vocabulary}


def check(passages: int = 20000) -> dict[str, float]:
    """The fit, and what a generated sample of ``passages`` shows (its Zipf exponent, its vocabulary against
    Heaps' prediction, its repeat share against the real one)."""
    f = fit()
    generator = Generator(passages)
    sample = [text.split() for chunk in generator.chunks() for _, text in chunk]
    counts = Counter(w for p in sample for w in p)
    tokens = sum(counts.values())
    real = _passages()
    return {"real_passages": len(real), "real_tokens": int(sum(map(len, real))), "head_words": len(f.words),
            "zipf_s_real": round(f.zipf_s, 3), "zipf_s_generated": round(fit_zipf(np.array(list(counts.values()))), 3),
            "heaps_k": round(f.heaps_k, 2), "heaps_beta": round(f.heaps_beta, 3),
            "vocabulary_generated": len(counts), "vocabulary_heaps": int(f.heaps_k * tokens ** f.heaps_beta),
            "tail_s": round(generator.tail_s, 3),
            "repeat_share_real": round(repeat_share(real), 3), "repeat_share_generated": round(repeat_share(sample), 3),
            "copy": round(f.copy, 3), "mean_length_real": round(float(f.lengths.mean()), 1),
            "mean_length_generated": round(tokens / len(sample), 1), "queries_real": len(f.queries)}


if __name__ == "__main__":
    print(json.dumps(check(), indent=2))

"""What code asks of a resource, as typing Protocols: an LLM that chats (:class:`ChatLLM`), a searcher
(:class:`Searcher`; :class:`TextSearcher` when it searches one query at a time, :class:`Partitioned` when it
searches partitions), a ranker (:class:`Ranker`; :class:`Encoder`
when it embeds texts).

A resource kind's factory (:mod:`ikatkit.pipelines.resources`) builds one of them; stages and tools type their
``llm``, ``searcher`` and ``ranker`` parameters with these, and a stage that needs more than its parameter's
capability (``select_partition``: partitions, an encoder) asks with ``isinstance``, never ``hasattr``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

Messages = list[dict[str, str]]  # one conversation, OpenAI-style
Hit = tuple[str, float]
"""A ranked passage: (passage id, score). A plain tuple: a NamedTuple costs four times the CPU to make, and the
garbage collector keeps tracking it (a batch of them set off full collections of the whole heap, JVM bridge and
Pyserini included); 1,000 of them a query were the last 5-20% between a k=1000 search and Java alone
(docs/benchmarks.md)."""


@runtime_checkable
class ChatLLM(Protocol):
    """An LLM (:class:`ikatkit.llm.base.LLM`): replies to batches of conversations, counts its fallbacks."""

    backend: str
    model: str
    stats: dict[str, float]

    def chat(self, batch: list[Messages], **overrides: Any) -> list[str]: ...

    def sample(self, batch: list[Messages], n: int, **overrides: Any) -> list[list[str]]: ...

    def count_fallback(self, what: str = ...) -> None: ...

    def identity(self) -> dict[str, Any]: ...


@runtime_checkable
class Searcher(Protocol):
    """A first-stage retriever (BM25, dense, partitioned): ranked passage ids per query, and the passages' texts."""

    def batch_search(self, queries: dict[str, str], k: int = ...) -> dict[str, list[Hit]]: ...

    @property
    def texts(self) -> Callable[[Sequence[str]], dict[str, str]]: ...


def expands_ptkb(searcher: Searcher) -> bool:
    """Whether the ``retrieve`` stage appends the PTKB statements to ``searcher``'s queries by default (its
    ``expand_ptkb`` unset): its ``expands_ptkb`` (its class's), True for a searcher without one. BM25 matches their
    words, as the UvA runs expand; dense and learned sparse encoders are trained on short queries and search the
    query alone (the official SPLADE baseline's): their classes say False."""
    return bool(getattr(searcher, "expands_ptkb", True))


@runtime_checkable
class TextSearcher(Searcher, Protocol):
    """A searcher that also searches one query at a time (BM25, dense)."""

    def search(self, query: str, k: int = ...) -> list[Hit]: ...


@runtime_checkable
class Partitioned(Protocol):
    """A searcher over partitions of an index (:class:`ikatkit.retrieve.partitioned.PartitionedSearcher`):
    ``partitions`` restricts a batch to some of them."""

    manifest: dict[str, Any]
    count: int
    folder: Path

    def batch_search(self, queries: Mapping[str, str], k: int = ...,
                     partitions: Any = ...) -> dict[str, list[Hit]]: ...

    def texts(self, ids: Sequence[str]) -> dict[str, str]: ...


@runtime_checkable
class Ranker(Protocol):
    """A re-ranker (:class:`ikatkit.rank.base.Ranker`: bi-encoder, cross-encoder, lexical): scores query-text
    pairs and ranks candidates."""

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]: ...

    def rank(self, query: str, candidates: dict[str, str], k: int | None = None) -> list[tuple[str, float]]: ...

    def rank_many(self, lists: dict[str, dict[str, str]],
                  k: int | None = None) -> dict[str, list[tuple[str, float]]]: ...


@runtime_checkable
class Encoder(Ranker, Protocol):
    """A ranker that embeds texts (the bi-encoder)."""

    def encode(self, texts: list[str]) -> Any: ...

"""The ``select_partition`` stage: Agent-S (or a baseline) picks each turn's partition; ``retrieve`` then
searches only there (``record.partitions``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ikatkit.capabilities import Encoder, Partitioned, Ranker
from ikatkit.errors import IkatError
from ikatkit.partition.selector import Policy, partition_rankings, states
from ikatkit.pipelines.base import StagePosition, Stage
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.registry import register

METHODS = ("agent", "centroid", "all")


@register
class SelectPartition(Stage):
    """``method`` agent: the DQN policy in ``policy`` (trained on these partitions) over the state of
    :func:`ikatkit.partition.selector.states`; centroid: the partition whose centroid is nearest the query;
    all: every partition (the whole index). Q-values are noted on the record."""

    name = "select_partition"
    requires = ("query",)
    provides = ("partitions",)

    def __init__(self, searcher: Partitioned, ranker: Ranker | None = None, policy: str | None = None,
                 method: str = "agent", top: int = 5) -> None:
        self.check({"method": method, "policy": policy, "top": top})
        if not isinstance(searcher, Partitioned):
            raise IkatError("select_partition needs a partitioned-bm25 searcher",
                            fix='declare kind = "partitioned-bm25" and name it as the stage\'s searcher')
        if method != "all" and not isinstance(ranker, Encoder):
            raise IkatError(f"select_partition ({method}) needs a bi-encoder ranker to embed the query",
                            fix='declare a kind = "bi-encoder" resource (model = "bundled:minilm")')
        centroids = searcher.manifest.get("centroids")
        self.centroids = None if centroids is None else np.asarray(centroids, dtype=np.float32)
        if method == "centroid" and self.centroids is None:
            raise IkatError("these partitions have no centroids (category strategy)", path=searcher.folder,
                            fix="use method = \"agent\" or partitions built from embeddings")
        self.policy: Policy | None = None
        if method == "agent":
            assert policy is not None  # check() requires one for the agent
            self.policy = Policy.load(policy, searcher.manifest)
        self.searcher, self.ranker, self.method, self.top = searcher, ranker, method, top

    @classmethod
    def check(cls, options: dict[str, Any], run_type: str = "automatic") -> None:
        """A known method, a policy file for the agent, a positive ``top``."""
        method = options.get("method", "agent")
        if method not in METHODS:
            raise IkatError(f"unknown select_partition method {method!r}", where="method", fix=f"use one of {METHODS}")
        if method == "agent" and not options.get("policy"):
            raise IkatError("select_partition (agent) needs policy = \"FILE\"", where="policy",
                            fix="train one with `ikatkit partition train-selector`")
        top = options.get("top", 5)
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise IkatError(f"top = {top!r} must be a positive integer", where="top", fix="e.g. top = 5")

    @classmethod
    def check_placement(cls, options: dict[str, Any], placement: StagePosition) -> None:
        """Partitions come from a partitioned-bm25 searcher; every method but ``all`` embeds with a bi-encoder."""
        if placement.kinds.get("searcher") != "partitioned-bm25":
            raise IkatError(f"select_partition needs a partitioned-bm25 searcher, and {options.get('searcher')!r} is "
                            f"a {placement.kinds.get('searcher')!r} resource",
                            fix='declare kind = "partitioned-bm25" and name it as the stage\'s searcher')
        method = options.get("method", "agent")
        if method != "all" and placement.kinds.get("ranker") != "bi-encoder":
            raise IkatError(f"select_partition ({method}) needs a bi-encoder ranker to embed the query",
                            fix='declare a kind = "bi-encoder" resource (model = "bundled:minilm") and name it')

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        if self.method == "all":
            for record in records:
                record.partitions = list(range(self.searcher.count))
            return records
        queries = {record.qid: record.query or record.utterance for record in records}
        assert isinstance(self.ranker, Encoder)  # __init__ refuses centroid and agent without one
        if self.method == "centroid":
            vectors = self.ranker.encode(list(queries.values()))
            for record, vector in zip(records, vectors):
                record.partitions = [int(np.argmax(self.centroids @ vector))]
            return records
        assert self.policy is not None  # the agent method: loaded in __init__
        rankings = partition_rankings(self.searcher, queries, self.top)
        found = states(queries, rankings, self.ranker.encode, self.searcher.texts,
                       self.centroids if "centroid_cosine" in self.policy.features else None, self.top)
        for record in records:
            q = self.policy.q_values(found[record.qid])
            record.partitions = [int(np.argmax(q))]
            record.notes.append("select_partition Q: " + " ".join(f"{v:.4f}" for v in q))
        return records

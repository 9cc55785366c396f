"""Agent-S of M-RAG (section 3.2): a DQN that picks the partition to retrieve from, and its baselines.

State: per partition, from the query's BM25 top ``top`` passages in that partition alone: log(1 + top BM25
score), that score over the best partition's, the best and the mean cosine (MiniLM) between the query and those
passages, and the cosine to the partition's centroid where the manifest has centroids. Action: a partition.
Reward: the retrieval metric (nDCG@3 against the qrels) of the chosen partition's ranking. Each episode is one
turn and one choice (the method's bandit setting), so the Q-target is the reward itself (no bootstrapping,
no target network). The Q-network is the paper's: one tanh layer of 25 units, one linear output per partition.
Training samples turns, chooses epsilon-greedily, stores (state, action, reward) in a replay memory and fits
Q on minibatches from it; everything is seeded, so a seed gives the same policy. The policy's file names the
partition manifest (its fingerprint) it was trained on and refuses any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.atomic import atomic_open
from ikatkit.capabilities import Hit, Partitioned
from ikatkit.errors import IkatError
from ikatkit.placement import torch_threads

POLICY_VERSION = 1
HIDDEN = 25


def feature_names(with_centroids: bool) -> list[str]:
    return ["log_bm25_top", "bm25_top_ratio", "best_cosine", "mean_cosine"] + (
        ["centroid_cosine"] if with_centroids else [])


def partition_rankings(searcher: Partitioned, queries: Mapping[str, str], k: int) -> list[dict[str, list[Hit]]]:
    """Each partition's own BM25 ranking of every query (``[partition][qid]``)."""
    return [searcher.batch_search(queries, k, partitions=[p]) for p in range(searcher.count)]


def states(queries: Mapping[str, str], rankings: Sequence[Mapping[str, list[Hit]]],
           encode: Callable[[list[str]], np.ndarray], texts: Callable[[Sequence[str]], dict[str, str]],
           centroids: np.ndarray | None, top: int = 5) -> dict[str, np.ndarray]:
    """``{qid: (M, F) features}`` (see the module's docstring); ``encode`` gives unit embeddings."""
    qids = list(queries)
    query_vectors = dict(zip(qids, encode([queries[q] for q in qids]))) if qids else {}
    tops = {pid for ranking in rankings for qid in qids for pid, _ in ranking[qid][:top]}
    found = texts(sorted(tops))
    order = sorted(found)
    passage_vectors = dict(zip(order, encode([found[pid] for pid in order]))) if order else {}
    result: dict[str, np.ndarray] = {}
    for qid in qids:
        q = query_vectors[qid]
        best_bm25 = max((ranking[qid][0][1] for ranking in rankings if ranking[qid]), default=0.0)
        rows = []
        for number, ranking in enumerate(rankings):
            hits = [pid for pid, _ in ranking[qid][:top] if pid in passage_vectors]
            cosines = [float(passage_vectors[pid] @ q) for pid in hits]
            score = ranking[qid][0][1] if ranking[qid] else 0.0
            row = [math.log1p(score), score / best_bm25 if best_bm25 > 0 else 0.0,
                   max(cosines, default=0.0), float(np.mean(cosines)) if cosines else 0.0]
            if centroids is not None:
                row.append(float(centroids[number] @ q))
            rows.append(row)
        result[qid] = np.asarray(rows, dtype=np.float32)
    return result


def _network(inputs: int, outputs: int) -> Any:  # a torch nn.Sequential; torch is imported only here
    from torch import nn

    return nn.Sequential(nn.Linear(inputs, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, outputs))


def train_dqn(state_rows: np.ndarray, rewards: np.ndarray, seed: int = 0, episodes: int = 20000,
              memory: int = 2000, batch: int = 32, lr: float = 0.01, epsilon: tuple[float, float] = (1.0, 0.05)
              ) -> dict[str, Any]:
    """Train the Q-network on turns with states ``(N, M, F)`` and each action's reward ``(N, M)``; its weights."""
    import torch

    count, m, width = state_rows.shape
    if count == 0:
        raise IkatError("no training turns with judgements", fix="pass topics whose turns the qrels judge")
    rng = np.random.default_rng(seed)
    with torch_threads(1):  # a 25-unit network: extra threads only contend (and one is reproducible)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = _network(m * width, m)
        return _fit(net, state_rows, rewards, rng, episodes, memory, batch, lr, epsilon)


def _fit(net: Any, state_rows: np.ndarray, rewards: np.ndarray, rng: np.random.Generator, episodes: int,
         memory: int, batch: int, lr: float, epsilon: tuple[float, float]) -> dict[str, Any]:
    """Rounds of ``batch`` episodes (turns drawn, epsilon-greedy choices, (s, a, r) into the replay memory), each
    followed by one Adam step on a minibatch drawn from the memory; epsilon falls linearly over 60% of training."""
    import torch

    count, m, width = state_rows.shape
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    flat = torch.from_numpy(state_rows.reshape(count, m * width).astype(np.float32))
    replay_s = np.zeros(memory, dtype=np.int64)
    replay_a = np.zeros(memory, dtype=np.int64)
    replay_r = np.zeros(memory, dtype=np.float32)
    stored = 0
    for done in range(0, episodes, batch):
        turns = rng.integers(count, size=min(batch, episodes - done))
        explore = epsilon[0] + (epsilon[1] - epsilon[0]) * min(1.0, done / (0.6 * episodes))
        with torch.no_grad():
            greedy = torch.argmax(net(flat[turns]), dim=1).numpy()
        actions = np.where(rng.random(len(turns)) < explore, rng.integers(m, size=len(turns)), greedy)
        slots = (stored + np.arange(len(turns))) % memory
        replay_s[slots], replay_a[slots], replay_r[slots] = turns, actions, rewards[turns, actions]
        stored += len(turns)
        sample = rng.integers(min(stored, memory), size=batch)
        q = net(flat[replay_s[sample]]).gather(1, torch.from_numpy(replay_a[sample])[:, None])[:, 0]
        loss = torch.nn.functional.mse_loss(q, torch.from_numpy(replay_r[sample]))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}


class Policy:
    """A trained Agent-S: Q-values of each partition for a state; tied to one partition manifest."""

    def __init__(self, weights: dict[str, Any], partitions: int, features: list[str], fingerprint: str,
                 meta: dict[str, Any] | None = None) -> None:
        self.weights, self.partitions, self.features = weights, partitions, features
        self.fingerprint, self.meta = fingerprint, meta or {}
        self.net = _network(partitions * len(features), partitions)
        self.net.load_state_dict(weights)

    def q_values(self, state: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.net(torch.from_numpy(state.reshape(1, -1).astype(np.float32)))[0].numpy()

    def choose(self, state: np.ndarray) -> int:
        return int(np.argmax(self.q_values(state)))

    def save(self, path: str | Path) -> None:
        import torch

        with atomic_open(path, "wb") as handle:
            torch.save({"version": POLICY_VERSION, "weights": self.weights, "partitions": self.partitions,
                        "features": self.features, "manifest_fingerprint": self.fingerprint, "meta": self.meta},
                       handle)

    @classmethod
    def load(cls, path: str | Path, manifest: Mapping[str, Any]) -> Policy:
        """The policy in ``path``; one clear error unless it was trained on ``manifest``'s partitions."""
        import torch

        path = Path(path)
        if not path.is_file():
            raise IkatError("no selector policy here", path=path,
                            fix="train one with `ikatkit partition train-selector`")
        try:
            data = torch.load(path, weights_only=True)
            version, fingerprint = data["version"], data["manifest_fingerprint"]
        except Exception as err:  # torch raises many kinds for a file that is not its own
            raise IkatError(f"not a selector policy ({type(err).__name__})", path=path,
                            fix="train one with `ikatkit partition train-selector`") from None
        if version != POLICY_VERSION:
            raise IkatError(f"policy version {version}, this ikatkit reads {POLICY_VERSION}", path=path,
                            fix="train the selector again")
        if fingerprint != manifest["fingerprint"]:
            raise IkatError("this policy was trained on other partitions than these", path=path,
                            fix="train the selector on these partitions with `ikatkit partition train-selector`")
        return cls(data["weights"], data["partitions"], data["features"], fingerprint, data["meta"])


def rewards_of(rankings: Sequence[Mapping[str, list[Hit]]], qrels: Mapping[str, Mapping[str, int]],
               qids: Sequence[str], measure: str = "nDCG@3") -> np.ndarray:
    """``(N, M)``: ``measure`` of each partition's ranking of each turn against ``qrels`` (ir-measures)."""
    import ir_measures

    parsed = ir_measures.parse_measure(measure)
    table = np.zeros((len(qids), len(rankings)), dtype=np.float32)
    judged = {q: dict(qrels[q]) for q in qids}
    for number, ranking in enumerate(rankings):
        run = {q: {pid: float(score) for pid, score in ranking[q]} for q in qids if ranking[q]}
        row = {q: i for i, q in enumerate(qids)}
        for metric in ir_measures.iter_calc([parsed], judged, run):
            table[row[metric.query_id], number] = metric.value
    return table


def judged_turns(topics: Any, qrels: Mapping[str, Mapping[str, int]] | None, provenance: bool
                 ) -> dict[str, dict[str, int]]:
    """Relevance of the turns to learn from: the qrels' judgements, else (``provenance``) the topics'
    ``response_provenance`` passages as grade 2; turns with no relevant passage are left out."""
    judged: dict[str, dict[str, int]] = {}
    for turn in topics:
        if qrels is not None and turn.qid in qrels:
            judged[turn.qid] = dict(qrels[turn.qid])
        elif provenance and turn.response_provenance:
            judged[turn.qid] = {pid: 2 for pid in turn.response_provenance}
    return {qid: rels for qid, rels in judged.items() if any(grade > 0 for grade in rels.values())}


def train_selector(folder: str | Path, queries: Mapping[str, str], judged: Mapping[str, Mapping[str, int]],
                   encode: Callable[[list[str]], np.ndarray], out: str | Path | None = None, *, seed: int = 0,
                   episodes: int = 20000, top: int = 5, measure: str = "nDCG@3", k: int = 100,
                   searcher: Partitioned | None = None) -> Policy:
    """Train Agent-S on the judged ``queries`` over the partitions in ``folder``; saved to ``out`` if given."""
    if searcher is None:
        from ikatkit.artifact import open_index

        searcher = open_index(folder, "partitions").searcher()
    qids = [qid for qid in queries if qid in judged]
    if not qids:
        raise IkatError("none of the queries has judgements", fix="pass qrels (or --provenance) for these topics")
    chosen = {qid: queries[qid] for qid in qids}
    rankings = partition_rankings(searcher, chosen, k)
    centroids = searcher.manifest.get("centroids")
    centres = None if centroids is None else np.asarray(centroids, dtype=np.float32)
    found = states(chosen, rankings, encode, searcher.texts, centres, top)
    weights = train_dqn(np.stack([found[q] for q in qids]), rewards_of(rankings, judged, qids, measure), seed,
                        episodes)
    policy = Policy(weights, searcher.count, feature_names(centres is not None), searcher.manifest["fingerprint"],
                    {"seed": seed, "episodes": episodes, "top": top, "measure": measure, "turns": qids})
    if out is not None:
        policy.save(out)
    return policy

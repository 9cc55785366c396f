"""Ranking without a pipeline: re-rank an existing run (``ikatkit rerank``), rank a topic file's PTKB
statements (``ikatkit ptkb``)."""

from __future__ import annotations

from collections.abc import Callable

from ikatkit.errors import IkatError
from ikatkit.capabilities import Ranker
from ikatkit.rank.base import PTKB_HISTORY_WEIGHT, history_texts, rank_ptkb
from ikatkit.rank.rerank import rerank_lists
from ikatkit.runs.model import Run, ranking_run
from ikatkit.topics import Topics


def rerank_run(run: Run, queries: dict[str, str], ranker: Ranker, texts: Callable[[list[str]], dict[str, str]],
               depth: int = 100, name: str | None = None) -> Run:
    """Each turn's top ``depth`` passages re-ranked by ``ranker`` against the turn's query; only those are kept.

    Texts come from the run where it carries them, else from ``texts(ids)`` (an index's stored passages).
    """
    lacking = [t.turn_id for t in run.turns if t.turn_id not in queries]
    if lacking:
        raise IkatError(f"no query for {len(lacking)} of the run's {len(run.turns)} turns, e.g. {lacking[:3]}",
                        where="--queries", fix="pass the topics the run answers, or a query file covering its turns")
    carried = {p.id: p.text for t in run.turns for r in t.responses for p in r.passages if p.text}
    tops = {t.turn_id: [pid for pid, _ in t.ranking()[:depth]] for t in run.turns}
    wanted = sorted({pid for ids in tops.values() for pid in ids} - set(carried))
    found = {**(texts(wanted) if wanted else {}), **carried}
    absent = [pid for pid in wanted if pid not in found]
    if absent:
        raise IkatError(f"{len(absent)} passages of the run have no text, e.g. {absent[:3]}", where="--index",
                        fix="pass the index the run was retrieved from")
    ranked = {turn_id: rerank_lists(ranker, {turn_id: (queries[turn_id], ids)}, found)[turn_id]  # a batch a turn
              for turn_id, ids in tops.items()}
    reranked = ranking_run(name or f"{run.run_name}-rerank", run.run_type, ranked)
    reranked.year, reranked.team_id = run.year, run.team_id
    return reranked


def rank_topics_ptkb(topics: Topics, queries: dict[str, str], ranker: Ranker, k: int | None = None,
                     history_turns: int = 0, history_weight: float = PTKB_HISTORY_WEIGHT,
                     history: dict[str, str] | None = None,
                     history_responses: int = 0) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(ptkb key, score), ...]}``: each turn's conversation PTKB ranked against its query with
    :func:`rank_ptkb`; the history is the previous ``history_turns`` turns' texts in ``history`` (default: the
    queries themselves, so raw utterances for raw queries, resolved ones for manual queries; the ``rank_ptkb``
    stage reads raw utterances whatever the query: pass ``topics.queries("raw")``), and the previous
    ``history_responses`` turns' canonical responses (the topics' ``response``; empty ones skipped)."""
    lacking = [qid for qid in topics.qids if qid not in queries]
    if lacking:
        raise IkatError(f"no query for {len(lacking)} of the {len(topics)} turns, e.g. {lacking[:3]}",
                        where="--queries", fix="pass a query file with a line for every turn")
    rankings = {}
    for conversation in topics.conversations:
        earlier: list[tuple[str, str]] = []
        for turn in conversation.turns:
            past = history_texts(earlier, history_turns, history_responses)
            rankings[turn.qid] = rank_ptkb(ranker, queries[turn.qid], dict(conversation.ptkb), k, past,
                                           history_weight)
            earlier.append(((history or queries)[turn.qid], turn.response or ""))
    return rankings

"""Agent-R's training (M-RAG, section 3.3): the boosting loop of ``refine_memory`` over a config's pipeline.

It loads a run config and runs its stages, so it sits above :mod:`ikatkit.pipelines`; the stage and the selector
it fits are in :mod:`ikatkit.stages.memory`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.stages.memory import FEATURES, MemorySelector, RefineMemory
from ikatkit.pipelines.config import RunConfig, load_config, with_stages
from ikatkit.pipelines.pipeline import Pipeline, train_stage
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.pipelines.session import RunSession
from ikatkit.topics import load_topics


def train_refiner(config_path: str | Path, topics_path: str | Path, out: str | Path, *,
                  index: str | Path | None = None, cache_dir: str | Path | None = None,
                  conversations: list[str] | None = None, ridge: float = 1.0) -> MemorySelector:
    """Run ``config``'s stages before ``refine_memory`` over the training turns that have a canonical response,
    the boosting loop with the config's ``respond`` stage (and any stage between them), fit the selector and
    save it to ``out``. ``cache_dir``: the cache root (:func:`ikatkit.paths.cache_at`). It runs in a
    :class:`~ikatkit.pipelines.session.RunSession` without writers (the config checked first, no run folder)."""
    config = load_config(config_path)
    with RunSession(config, None, index=index, cache_dir=cache_dir) as session:
        return _train(session, config, topics_path, out, conversations, ridge)


def _train(session: RunSession, config: RunConfig, topics_path: str | Path, out: str | Path,
           conversations: list[str] | None, ridge: float) -> MemorySelector:
    names = config.names()
    if "refine_memory" not in names:
        raise IkatError("the config has no refine_memory stage", path=config.path, fix="add one (see configs/)")
    at = names.index("refine_memory")
    if "respond" not in names[at:]:
        raise IkatError("no respond stage after refine_memory", path=config.path,
                        fix="put a respond stage after refine_memory: it answers from each candidate memory")
    end = names.index("respond", at)
    topics = load_topics(topics_path)
    if conversations:
        topics = topics.subset(conversations)
    references = {turn.qid: turn.response for turn in topics if turn.response and turn.response.strip()}
    records = [r for r in records_for(topics) if r.qid in references]
    if not records:
        raise IkatError("no training turn has a canonical response", path=topics_path,
                        fix="train on topics with responses (the 2023 train or test topics)")
    pipeline = session.pipeline(with_stages(config, config.stages[: end + 1]),
                                refine_memory={"selector": ""})  # the selector it is about to fit
    pipeline.check(records)
    before, refiner, respond = (Pipeline(pipeline.stages[:at]), pipeline.stages[at], Pipeline(pipeline.stages[at + 1:]))
    assert isinstance(refiner, RefineMemory)
    rows: list[tuple[list[float], float]] = []
    traced: list[TurnRecord] = []
    for start in range(0, len(records), config.batch_size):
        batch = before(records[start: start + config.batch_size])
        rows.extend(train_stage(refiner, batch, references, respond))
        traced.extend(batch)
    x = np.asarray([r for r, _ in rows], dtype=np.float64).reshape(len(rows), len(FEATURES))
    gains = np.asarray([g for _, g in rows], dtype=np.float64)
    kept = [r.memory_trace["candidates"][r.memory_trace["chosen"]]["gain"] if r.memory_trace.get("chosen") is not None
            else 0.0 for r in traced]  # the kept memory's gain over the raw passages (0: the passages kept)
    meta = {"config": str(config.path), "topics": str(topics_path), "turns": [r.qid for r in traced],
            "candidates": len(rows), "degenerate": sum(r.memory_trace.get("degenerate", 0) for r in traced),
            "turns_improved": sum(g > 0 for g in kept), "metric": refiner.metric, "ridge": ridge,
            "mean_gain": round(float(gains.mean()), 6) if len(gains) else None,
            "mean_kept_gain": round(float(np.mean(kept)), 6)}
    selector = MemorySelector.fit(x, gains, refiner.fingerprint(), ridge, meta)
    selector.save(out)
    return selector

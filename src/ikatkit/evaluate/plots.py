"""Breakdowns as PNG plots (headless matplotlib): a measure per turn position and per conversation."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ikatkit.evaluate.evaluate import EvalResult  # noqa: E402
from ikatkit.topics import split_query_id  # noqa: E402


def place(qid: str) -> tuple[str, int | None]:
    """(conversation, turn number) of a row; a whole dialogue's row (keyed by its topic, as rubric measures are)
    has no turn number."""
    return (qid, None) if "_" not in qid else split_query_id(qid)


def by_position(result: EvalResult, measure: str) -> dict[int, float]:
    """Mean of ``measure`` per turn number, over conversations (rows of whole dialogues have none)."""
    groups: dict[int, list[float]] = {}
    for qid, values in result.per_query.items():
        turn = place(qid)[1]
        if measure in values and turn is not None:
            groups.setdefault(turn, []).append(values[measure])
    return {turn: sum(v) / len(v) for turn, v in sorted(groups.items())}


def by_conversation(result: EvalResult, measure: str) -> dict[str, float]:
    """Mean of ``measure`` per conversation."""
    groups: dict[str, list[float]] = {}
    for qid, values in result.per_query.items():
        if measure in values:
            groups.setdefault(place(qid)[0], []).append(values[measure])
    return {c: sum(v) / len(v) for c, v in sorted(groups.items(), key=lambda item: natural_key(item[0]))}


def natural_key(name: str) -> list[int | str]:
    """Sort key that orders "10-1" after "9-2"."""
    return [int(part) if part.isdigit() else part for part in name.replace("-", " ").split()]


def plot_breakdowns(results: dict[str, EvalResult], measure: str, out: Path, prefix: str = "") -> list[Path]:
    """Two PNGs: ``measure`` per turn position (lines) and per conversation (grouped bars); file names and
    titles start with ``prefix`` (``ptkb_`` -> "PTKB ...")."""
    out.mkdir(parents=True, exist_ok=True)
    label = prefix.strip("_").upper() + " " if prefix else ""
    paths = []
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for name, result in results.items():
        series = by_position(result, measure)
        ax.plot(list(series), list(series.values()), marker="o", label=name)
    counts: dict[int, set[str]] = {}
    for result in results.values():
        for qid in result.per_query:
            if (turn := place(qid)[1]) is not None:
                counts.setdefault(turn, set()).add(qid)
    ax.set_xticks(sorted(counts), [f"{t}\n{len(counts[t])}" for t in sorted(counts)], fontsize=8)
    ax.set(xlabel="turn position in the conversation (below it: judged turns averaged)", ylabel=measure,
           title=f"{label}{measure} per turn position")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths.append(out / f"{prefix}{_safe(measure)}_per_turn.png")
    fig.savefig(paths[-1])
    plt.close(fig)
    conversations = sorted({c for r in results.values() for c in by_conversation(r, measure)}, key=natural_key)
    fig, ax = plt.subplots(figsize=(max(8, len(conversations) * 0.45), 4.5), dpi=120)
    width = 0.8 / max(len(results), 1)
    for i, (name, result) in enumerate(results.items()):
        series = by_conversation(result, measure)
        ax.bar([x + i * width for x in range(len(conversations))], [series.get(c, 0.0) for c in conversations],
               width=width, label=name)
    ax.set_xticks([x + width * (len(results) - 1) / 2 for x in range(len(conversations))], conversations,
                  rotation=60, ha="right")
    ax.set(ylabel=measure, title=f"{label}{measure} per conversation")
    ax.legend()
    fig.tight_layout()
    paths.append(out / f"{prefix}{_safe(measure)}_per_conversation.png")
    fig.savefig(paths[-1])
    plt.close(fig)
    return paths


def _safe(measure: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in measure)

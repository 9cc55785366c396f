"""Breakdowns as PNG plots (headless matplotlib): a measure per turn position and per conversation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

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


SECTIONS = {"": "Passage ranking", "ptkb_": "PTKB statement ranking", "responses_": "Responses"}
KINDS = {"per_turn": "per turn position", "per_conversation": "per conversation"}
MIN_LINE_TURNS = 3  # a turn position with fewer judged turns is a hollow point, off the line
MARKERS = "osD^v<>p"  # one marker shape per run; runs' points are also set apart sideways (equal values stay visible)
SPREAD = 0.24  # the turn-position plot's sideways room for the runs' points, in turn positions
Area = tuple[str, tuple[float, float, float, float]]  # what a part of a plot stands for, its box in image fractions


def plot_caption(measure: str, kind: str, prefix: str = "") -> str:
    """A plot's title and caption in words: "Passage ranking: nDCG@5 per turn position"."""
    return f"{SECTIONS.get(prefix, prefix.strip('_'))}: {measure} {KINDS[kind]}"


def natural_key(name: str) -> list[int | str]:
    """Sort key that orders "10-1" after "9-2"."""
    return [int(part) if part.isdigit() else part for part in name.replace("-", " ").split()]


def plot_breakdowns(results: dict[str, EvalResult], measure: str, out: Path, prefix: str = "",
                    areas: dict[Path, list[Area]] | None = None) -> list[Path]:
    """Two PNGs: ``measure`` per turn position (lines, broken where a run has no point; positions with fewer than
    ``MIN_LINE_TURNS`` judged turns hollow and off the line; each run its marker shape and a small sideways offset,
    so equal values of two runs show both) and per conversation (grouped bars); file names start with ``prefix``,
    titles are :func:`plot_caption`'s. ``areas`` receives, per PNG, the box of each turn position (``"3"``) and of
    each conversation's bar group (``"9-1"``), for links over the image."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    counts: dict[int, set[str]] = {}
    for result in results.values():
        for qid, values in result.per_query.items():
            if measure in values and (turn := place(qid)[1]) is not None:
                counts.setdefault(turn, set()).add(qid)
    positions = list(range(min(counts), max(counts) + 1)) if counts else []  # a position without turns: a gap
    counts = {t: counts.get(t, set()) for t in positions}
    for i, (name, result) in enumerate(results.items()):
        series = by_position(result, measure)
        shift = (i - (len(results) - 1) / 2) * SPREAD / max(len(results) - 1, 1)
        marker = MARKERS[i % len(MARKERS)]
        solid = [series.get(t, math.nan) if len(counts[t]) >= MIN_LINE_TURNS else math.nan for t in positions]
        line, = ax.plot([t + shift for t in positions], solid, marker=marker, label=name)  # nan: the line breaks
        few = [t for t in positions if t in series and len(counts[t]) < MIN_LINE_TURNS]
        ax.plot([t + shift for t in few], [series[t] for t in few], marker=marker, linestyle="none",
                markerfacecolor="none", color=line.get_color())
    ax.set_xticks(positions, [f"{t}\n{len(counts[t]) or '-'}" for t in positions], fontsize=8)
    ax.set(xlabel=f"turn position in the conversation; below it: judged turns averaged (hollow: fewer than "
                  f"{MIN_LINE_TURNS}, not joined)", ylabel=measure, title=plot_caption(measure, "per_turn", prefix))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths.append(out / f"{prefix}{_safe(measure)}_per_turn.png")
    fig.savefig(paths[-1])
    if areas is not None:
        areas[paths[-1]] = [(str(t), _box(fig, ax, t - 0.5, t + 0.5)) for t in positions]
    plt.close(fig)
    conversations = sorted({c for r in results.values() for c in by_conversation(r, measure)}, key=natural_key)
    fig, ax = plt.subplots(figsize=(max(8, len(conversations) * 0.45), 4.5), dpi=120)
    width = 0.8 / max(len(results), 1)
    for i, (name, result) in enumerate(results.items()):
        per_conversation = by_conversation(result, measure)
        ax.bar([x + i * width for x in range(len(conversations))],
               [per_conversation.get(c, math.nan) for c in conversations],
               width=width, label=name)
    ax.set_xticks([x + width * (len(results) - 1) / 2 for x in range(len(conversations))], conversations,
                  rotation=60, ha="right")
    ax.set(ylabel=measure, title=plot_caption(measure, "per_conversation", prefix))
    ax.legend()
    fig.tight_layout()
    paths.append(out / f"{prefix}{_safe(measure)}_per_conversation.png")
    fig.savefig(paths[-1])
    if areas is not None:
        areas[paths[-1]] = [(c, _box(fig, ax, x - width / 2, x + width * (len(results) - 0.5)))
                            for x, c in enumerate(conversations)]
    plt.close(fig)
    return paths


def _box(fig: Any, ax: Any, x0: float, x1: float) -> tuple[float, float, float, float]:
    """The box over the axes between data x0 and x1, full height, as (left, top, width, height) fractions of
    the saved image (the same at any displayed size)."""
    bottom, top = ax.get_position().y0, ax.get_position().y1
    to_figure = ax.transData + fig.transFigure.inverted()
    left, right = to_figure.transform((x0, 0))[0], to_figure.transform((x1, 0))[0]
    return left, 1 - top, right - left, top - bottom


def _safe(measure: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in measure)

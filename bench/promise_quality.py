"""ProMiSe measured (seed paper Table 1): the plain RtG response, the initial best-of-N and the final refined
response of ``refine_response`` runs, for three proxy-metric settings, scored by ``ikatkit.evaluate.responses``
(the measures of ``ikatkit eval-responses``) with ``compare``'s paired t-tests.

    python bench/promise_quality.py configs WORK                  # WORK/{train,rouge,consistency,both}.toml
    python bench/promise_quality.py thresholds WORK/train/*       # medians of the initial responses' proxy scores
    python bench/promise_quality.py table WORK/test --topics test_topics.json [--json out.json]

``configs`` derives the settings from ``configs/rtg_promise.toml`` (its four proxy metrics and thresholds):
``rouge`` keeps the three ROUGE metrics, ``consistency`` only ``embedding_passages`` (MiniLM cosine with the best
used passage, standing in for the seed's factual-consistency model: no NLI model is available offline), ``both``
all four; ``train`` is ``both`` with ``iterations = 0`` (best-of-N only), for choosing thresholds.
``thresholds`` prints, per proxy metric, the median score of the initial responses over the given runs' turns:
each metric alone then sends about half the turns to refinement (the seed's appendix B treats thresholds as the
control of the refinement rate). ``table`` reads ``WORK/test/{setting}/{conversation}/`` runs (one run per
conversation, so a table can use the whole conversations finished in every setting) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

from ikatkit.evaluate.compare import compare_responses
from ikatkit.evaluate.responses.data import ResponseRun
from ikatkit.pipelines.record import TurnRecord
from ikatkit.topics import load_topics

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "rtg_promise.toml"
ROUGE = ("rouge1_recall_passages", "rougeL_passages", "rougeL_history")
SETTINGS = {"rouge": ROUGE, "consistency": ("embedding_passages",), "both": (*ROUGE, "embedding_passages")}
MEASURES = ["ROUGE-L", "Recall", "BERTScore-R", "K-Precision", "BERTScore-KP"]
SYSTEMS = ("plain", "initial", "final")


def records(run_dir: Path) -> list[TurnRecord]:
    """The records of a run's checkpoints, in turn order."""
    out = []
    for path in sorted((run_dir / "checkpoints").glob("batch-*.json")):
        out.extend(TurnRecord.from_json(r) for r in json.loads(path.read_text(encoding="utf-8"))["records"])
    return out


def _metrics_line(metrics: dict[str, dict[str, float]]) -> str:
    inner = ", ".join(f"{m} = {{ threshold = {s['threshold']}, weight = {s.get('weight', 1.0)} }}"
                      for m, s in metrics.items())
    return f"metrics = {{ {inner} }}"


def write_configs(work: Path) -> list[Path]:
    """The three settings and the train (best-of-N only) config, derived from configs/rtg_promise.toml."""
    import tomllib

    text = CONFIG.read_text(encoding="utf-8")
    metrics = tomllib.loads(text)["stages"][-1]["metrics"]
    work.mkdir(parents=True, exist_ok=True)
    written = []
    for name, keep in (*SETTINGS.items(), ("train", SETTINGS["both"])):
        body, count = re.subn(r"(?m)^metrics = .*$", _metrics_line({m: metrics[m] for m in keep}), text)
        if name == "train":
            body, more = re.subn(r"(?m)^iterations = \d+", "iterations = 0", body)
            count += more
        assert count == (2 if name == "train" else 1), f"{CONFIG} lost its metrics/iterations line"
        path = work / f"{name}.toml"
        path.write_text(body.replace('name = "rtg-promise"', f'name = "rtg-promise-{name}"'), encoding="utf-8")
        written.append(path)
    return written


def thresholds(run_dirs: list[Path]) -> dict[str, Any]:
    """Per proxy metric, the median score of the initial (best-of-N) responses over the runs' turns."""
    scores = [r.refinement["candidates"][r.refinement["initial"]]["scores"] for d in run_dirs for r in records(d)
              if r.refinement and r.refinement["initial"] is not None]
    return {"turns": len(scores),
            "median_initial_scores": {m: round(statistics.median(s[m] for s in scores), 4) for m in scores[0]}}


def responses(recs: list[TurnRecord]) -> dict[str, ResponseRun]:
    """The plain (respond stage), initial (best-of-N) and final (refined) response of every turn."""
    runs = {s: ResponseRun(s, {}, {}) for s in SYSTEMS}
    for r in recs:
        t = r.refinement
        initial = t["candidates"][t["initial"]]["text"] if t["initial"] is not None else t["plain"]
        for system, text in zip(SYSTEMS, (t["plain"], initial, r.response)):
            runs[system].responses[r.qid] = text
            runs[system].used[r.qid] = list(r.used)
    return runs


def finished(work: Path) -> list[str]:
    """Conversations with a finished run (its manifest written) in every setting."""
    done = [{d.name for d in (work / s).iterdir() if (d / "manifest.json").is_file()} if (work / s).is_dir()
            else set() for s in SETTINGS]
    return sorted(set.intersection(*done), key=lambda c: tuple(int(x) for x in c.split("-")))


def table(work: Path, topics_path: Path) -> dict[str, Any]:
    from ikatkit.evaluate.responses.evaluate import ResponseScorers

    topics = load_topics(topics_path)
    conversations = finished(work)
    scorers = ResponseScorers()  # one BERTScore / MiniLM load for every setting
    result: dict[str, Any] = {"conversations": conversations, "settings": {}}
    plain: dict[str, str] | None = None
    for setting in SETTINGS:
        recs = [r for c in conversations for r in records(work / setting / c)]
        texts = {pid: text for r in recs for pid, text in r.passage_texts.items()}
        runs = responses(recs)
        if plain is not None:
            assert runs["plain"].responses == plain, "the settings do not share the plain RtG responses"
        plain = runs["plain"].responses
        comparison = compare_responses(list(runs.values()), baseline="plain", measures=MEASURES, all_pairs=True,
                                       topics=topics, passages=lambda ids: {p: texts[p] for p in ids if p in texts},
                                       scorers=scorers)
        traces = [r.refinement for r in recs]
        result["turns"] = len(recs)
        result["settings"][setting] = {
            "metrics": list(SETTINGS[setting]),
            "means": {s: {m: round(100 * v, 2) for m, v in comparison.results[s].mean.items()} for s in SYSTEMS},
            "pairs": [{k: row[k] for k in ("run_a", "run_b", "measure", "delta", "p", "p_adjusted", "wins", "ties",
                                           "losses", "turns")} for row in comparison.pairs],
            "share_refined": round(sum(t["iterations"] > 0 for t in traces) / len(traces), 4),
            "mean_iterations": round(sum(t["iterations"] for t in traces) / len(traces), 3),
            "llm_calls_per_turn": round(sum(t["llm_calls"] for t in traces) / len(traces), 3),
            "final_differs_from_initial": sum(t["best"] != t["initial"] for t in traces),
            "empty_outputs": sum(t["empty_outputs"] for t in traces),
            "stopped": {s: sum(t["stopped"] == s for t in traces) for s in sorted({t["stopped"] for t in traces})},
        }
    return result


def markdown(result: dict[str, Any]) -> str:
    """One row per response and setting with the refinement counts; p: paired t-test of initial vs plain and of
    final vs initial (``*``: p < 0.05 after Holm correction over the setting's 15 tests)."""
    first = next(iter(result["settings"].values()))
    labels = list(first["means"]["plain"])
    header = [m.split("[", 1)[0] for m in labels]
    lines = ["| setting | response | " + " | ".join(header) + " | refined | iterations | refine LLM calls/turn |",
             "|---" * (len(labels) + 5) + "|",
             "| - | plain RtG | " + " | ".join(f"{first['means']['plain'][m]:.2f}" for m in labels) + " | | | |"]
    for setting, s in result["settings"].items():
        def p(a: str, b: str, m: str) -> str:
            row = next(r for r in s["pairs"] if (r["run_a"], r["run_b"], r["measure"]) == (a, b, m))
            if math.isnan(row["p"]):
                return " (same)"
            return f" (p={row['p']:.3f}{'*' if row['p_adjusted'] < 0.05 else ''})"
        lines.append(f"| {setting} | initial (best-of-N) | " + " | ".join(
            f"{s['means']['initial'][m]:.2f}{p('plain', 'initial', m)}" for m in labels) + " | | | |")
        lines.append(f"| {setting} | final (refined) | " + " | ".join(
            f"{s['means']['final'][m]:.2f}{p('initial', 'final', m)}" for m in labels)
            + f" | {100 * s['share_refined']:.1f}% | {s['mean_iterations']:.2f} | {s['llm_calls_per_turn']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("configs", help="write the settings' configs").add_argument("work", type=Path)
    sub.add_parser("thresholds", help="median initial proxy scores of train runs").add_argument(
        "runs", type=Path, nargs="+")
    p = sub.add_parser("table", help="the table over WORK/{setting}/{conversation} runs")
    p.add_argument("work", type=Path)
    p.add_argument("--topics", type=Path, required=True)
    p.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "configs":
        print("\n".join(map(str, write_configs(args.work))))
    elif args.command == "thresholds":
        print(json.dumps(thresholds(args.runs)))
    else:
        result = table(args.work, args.topics)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(markdown(result))
        print(json.dumps({k: v for k, v in result.items() if k != "settings"}))
        for setting, s in result["settings"].items():
            print(setting, json.dumps({k: v for k, v in s.items() if k not in ("means", "pairs")}))


if __name__ == "__main__":
    main()

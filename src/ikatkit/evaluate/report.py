"""Write a comparison to files: Markdown, CSV, LaTeX, breakdown plots and tables, one self-contained HTML."""

from __future__ import annotations

import base64
import csv
import html
import io
import math
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_text
from ikatkit.evaluate.compare import JUDGED_DEPTHS, Comparison, compare_ptkb, compare_runs, format_interval, format_p
from ikatkit.evaluate.plots import (KINDS, by_conversation, by_position, natural_key, place, plot_breakdowns,
                                    plot_caption)


def write_comparison(comparison: Comparison, out: Path, prefix: str = "") -> dict[str, Any]:
    """All files of a comparison in ``out`` (names start with ``prefix``): Markdown, CSV and LaTeX tables (and
    the all-pairs CSV), per-turn-position and per-conversation tables of every measure with the count of judged
    turns behind each value, and two plots per measure."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {"markdown": out / f"{prefix}comparison.md", "csv": out / f"{prefix}comparison.csv",
                             "latex": out / f"{prefix}comparison.tex"}
    write_text(files["markdown"], comparison.to_markdown() + "\n")
    write_text(files["csv"], comparison.to_csv())
    write_text(files["latex"], comparison.to_latex())
    if comparison.pairs:
        files["pairs"] = out / f"{prefix}pairs.csv"
        write_text(files["pairs"], comparison.pairs_csv())
    files["plots"] = [path for measure in comparison.measures
                      for path in plot_breakdowns(comparison.results, measure, out, prefix=prefix)]
    files["captions"] = [plot_caption(measure, kind, prefix) for measure in comparison.measures for kind in KINDS]
    for kind, breakdown, group in (("per_turn", by_position, lambda q: place(q)[1]),
                                   ("per_conversation", by_conversation, lambda q: place(q)[0])):
        turns: dict[Any, set[str]] = {}
        for result in comparison.results.values():
            for qid in result.per_query:
                if group(qid) is not None:
                    turns.setdefault(group(qid), set()).add(qid)
        table = io.StringIO()
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow([kind.split("_", 1)[1], "judged_turns", "measure", *comparison.results])
        for measure in comparison.measures:
            series = [breakdown(r, measure) for r in comparison.results.values()]
            for key in sorted(turns, key=lambda k: natural_key(str(k))):
                writer.writerow([key, len(turns[key]), measure, *(f"{s.get(key, float('nan')):.4f}" for s in series)])
        files[kind] = out / f"{prefix}{kind}.csv"
        write_text(files[kind], table.getvalue())
    return files


def write_report(runs: dict[str, Any], qrels: Any, out: Path, ptkb_qrels: Any = None, topics: Any = None,
                 responses: Comparison | None = None, **options: Any) -> Path:
    """The manual-vs-automatic report: one HTML file with the runs compared (type, description, file, judged turns
    ranked and not, judged@k) and the qrels, a table per comparison (one row per run and measure) and every plot
    embedded with a caption in words; ``qrels`` None leaves the ranking sections out, ``responses`` (a
    ``compare_responses`` result) adds the response measures."""
    sections: list[str] = []
    plots: list[tuple[Path, str]] = []
    if qrels is not None:
        comparison = compare_runs(runs, qrels, **options)
        ptkb = None
        if ptkb_qrels is not None:
            ptkb = compare_ptkb(runs, ptkb_qrels, topics, baseline=comparison.baseline, test=comparison.test,
                                correction=comparison.correction, missing=options.get("missing", "skip"),
                                all_pairs=options.get("all_pairs", False))
        files = write_comparison(comparison, out)
        plots += zip(files["plots"], files["captions"])
        sections += [_sources_html(runs, comparison, ptkb), _table_html("Passage ranking", comparison)]
        if ptkb is not None:
            files = write_comparison(ptkb, out, prefix="ptkb_")
            plots += zip(files["plots"], files["captions"])
            sections.append(_table_html("PTKB statement ranking", ptkb))
    if responses is not None:
        if qrels is None:
            sections.append(_sources_html(runs, responses, None))
        files = write_comparison(responses, out, prefix="responses_")
        plots += zip(files["plots"], files["captions"])
        sections.append(_table_html("Responses", responses))
    for path, caption in plots:
        data = base64.b64encode(Path(path).read_bytes()).decode()
        sections.append(f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>ikatkit report</title><style>"
            "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
            ".box{max-width:100%;overflow-x:auto}table{border-collapse:collapse;margin:0.5em 0}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;white-space:nowrap}"
            "td:first-child,th:first-child,.text{text-align:left}"
            ".wrap{max-width:24em;white-space:normal;overflow-wrap:anywhere;text-align:left}"
            "th.wrap{overflow-wrap:normal}figure{margin:1em 0}img{max-width:100%}figcaption{font-style:italic}"
            "</style></head><body><h1>Run comparison</h1>" + "".join(sections) + "</body></html>")
    path = out / "report.html"
    write_text(path, page)
    return path


def _rows_html(rows: list[list[str]], classes: dict[int, str] | None = None) -> str:
    """A table in a box that scrolls sideways rather than spill out of the page (``classes``: column -> class)."""
    classes = classes or {}
    head = "".join(f"<th{f' class={classes[i]}' if i in classes else ''}>{html.escape(c)}</th>"
                   for i, c in enumerate(rows[0]))
    body = "".join("<tr>" + "".join(f"<td{f' class={classes[i]}' if i in classes else ''}>{html.escape(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows[1:])
    return f"<div class=box><table><tr>{head}</tr>{body}</table></div>"


def run_info(run: Any) -> tuple[str, str]:
    """A run's type and description as its file states them (the 2025 released runs' ``metadata.description``);
    empty where it states none."""
    from ikatkit.runs.io import load_records, read_run
    from ikatkit.runs.model import Run

    if not isinstance(run, (str, Path, Run)):
        return "", ""
    kind = run.run_type if isinstance(run, Run) else read_run(run).run_type
    description = ""
    if not isinstance(run, Run):
        records = load_records(run)[1]
        first = records[0] if isinstance(records, list) and records else {}
        if isinstance(first, dict):
            metadata = first.get("metadata")
            meta = metadata if isinstance(metadata, dict) else first
            description = str(meta.get("description") or meta.get("run_description") or "")
    return kind, description


def _sources_html(runs: dict[str, Any], comparison: Comparison, ptkb: Comparison | None) -> str:
    """What was compared: each run's type, description and file, the judged turns it ranks and leaves unranked,
    its judged@k, and the qrels."""
    depths = JUDGED_DEPTHS if comparison.judged else ()
    rows = [["run", "type", "description", "file", "judged turns ranked", "judged turns unranked",
             *(f"judged@{k}" for k in depths)]]
    for name, (ranked, unranked) in comparison.coverage.items():
        kind, description = run_info(runs.get(name))
        rows.append([name, kind, description, comparison.sources.get(name, ""), str(ranked), str(unranked),
                     *(f"{comparison.judged[name][k]:.3f}" for k in depths)])
    qrels = f"qrels: {comparison.qrels}" + (f"; PTKB qrels: {ptkb.qrels}" if ptkb is not None else "")
    return (f"<h2>Runs</h2>{_rows_html(rows, {1: 'text', 2: 'wrap', 3: 'wrap'})}<p>{html.escape(qrels)}</p>"
            "<p>judged@k: share of a run's top k passages that are judged, over the judged turns it ranks.</p>")


def _long_rows(comparison: Comparison) -> list[list[str]]:
    """One row per measure and run: mean, interval, and against the baseline delta, corrected p, wins/ties/losses
    and the turns they are over."""
    rows = [["run", "measure", "mean", "95% CI", "delta", f"p ({comparison.correction})", "wins/ties/losses",
             "turns"]]
    for measure in comparison.measures:
        for row in (r for r in comparison.rows if r["measure"] == measure):
            base = row["run"] == comparison.baseline
            mark = "*" if not base and not math.isnan(row["p_adjusted"]) and row["p_adjusted"] < 0.05 else ""
            rows.append([row["run"], measure, f"{row['mean']:.4f}{mark}",
                         format_interval(row["ci_low"], row["ci_high"]),
                         "" if base else f"{row['delta']:+.4f}", "" if base else format_p(row["p_adjusted"]),
                         "" if base else f"{row['wins']}/{row['ties']}/{row['losses']}", str(row["turns"])])
    return rows


def _table_html(title: str, comparison: Comparison) -> str:
    note = html.escape(comparison.note().replace("`", "").replace("; judged@k", ". judged@k"))
    pairs = f"<h3>All pairs</h3>{_rows_html(comparison.pairs_table())}" if comparison.pairs else ""
    return f"<h2>{html.escape(title)}</h2>{_rows_html(_long_rows(comparison), {1: 'text'})}<p>{note}</p>{pairs}"

"""Write a comparison to files: Markdown, CSV, LaTeX, breakdown plots and tables, one self-contained HTML."""

from __future__ import annotations

import base64
import csv
import html
import io
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_text
from ikatkit.evaluate.compare import Comparison, compare_ptkb, compare_runs
from ikatkit.evaluate.plots import by_conversation, by_position, natural_key, plot_breakdowns
from ikatkit.topics import split_query_id


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
    for kind, breakdown, group in (("per_turn", by_position, lambda q: split_query_id(q)[1]),
                                   ("per_conversation", by_conversation, lambda q: split_query_id(q)[0])):
        turns: dict[Any, set[str]] = {}
        for result in comparison.results.values():
            for qid in result.per_query:
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
    """The manual-vs-automatic report: one HTML file with the runs and qrels compared (paths, turns evaluated
    and missing), the tables and every plot embedded; ``qrels`` None leaves the ranking sections out,
    ``responses`` (a ``compare_responses`` result) adds the response measures."""
    sections: list[str] = []
    plots: list[Path] = []
    if qrels is not None:
        comparison = compare_runs(runs, qrels, **options)
        ptkb = None
        if ptkb_qrels is not None:
            ptkb = compare_ptkb(runs, ptkb_qrels, topics, baseline=comparison.baseline, test=comparison.test,
                                correction=comparison.correction, missing=options.get("missing", "skip"),
                                all_pairs=options.get("all_pairs", False))
        plots += write_comparison(comparison, out)["plots"]
        sections += [_sources_html(comparison, ptkb), _table_html("Passage ranking", comparison)]
        if ptkb is not None:
            plots += write_comparison(ptkb, out, prefix="ptkb_")["plots"]
            sections.append(_table_html("PTKB statement ranking", ptkb))
    if responses is not None:
        if qrels is None:
            sections.append(_sources_html(responses, None))
        plots += write_comparison(responses, out, prefix="responses_")["plots"]
        sections.append(_table_html("Responses", responses))
    for path in plots:
        data = base64.b64encode(Path(path).read_bytes()).decode()
        sections.append(f'<figure><img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{html.escape(Path(path).stem)}</figcaption></figure>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>ikatkit report</title><style>"
            "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}"
            "img{max-width:100%}</style></head><body><h1>Run comparison</h1>" + "".join(sections) + "</body></html>")
    path = out / "report.html"
    write_text(path, page)
    return path


def _rows_html(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    return f"<table><tr>{head}</tr>{body}</table>"


def _sources_html(comparison: Comparison, ptkb: Comparison | None) -> str:
    """What was compared: each run's file, the qrels, and the judged turns evaluated and missing per run."""
    rows = [["run", "file", "judged turns evaluated", "judged turns missing"]]
    rows += [[name, comparison.sources.get(name, ""), str(ranked), str(unranked)]
             for name, (ranked, unranked) in comparison.coverage.items()]
    qrels = f"qrels: {comparison.qrels}" + (f"; PTKB qrels: {ptkb.qrels}" if ptkb is not None else "")
    return f"<h2>Runs</h2>{_rows_html(rows)}<p>{html.escape(qrels)}</p>"


def _table_html(title: str, comparison: Comparison) -> str:
    note = html.escape(comparison.note().replace("`", ""))
    pairs = f"<h3>All pairs</h3>{_rows_html(comparison.pairs_table())}" if comparison.pairs else ""
    return f"<h2>{html.escape(title)}</h2>{_rows_html(comparison.table())}<p>{note}</p>{pairs}"

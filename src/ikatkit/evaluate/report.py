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


def write_comparison(comparison: Comparison, out: Path, measure: str | None = None, prefix: str = "") -> dict[str, Any]:
    """All files of a comparison in ``out`` (names start with ``prefix``): Markdown, CSV and LaTeX tables,
    per-turn and per-conversation tables and plots of ``measure`` (default: nDCG@5, else the first measure)."""
    out.mkdir(parents=True, exist_ok=True)
    measure = measure or next((m for m in ("nDCG@5", "ROUGE-L", "NuggetRecall") if m in comparison.measures),
                              comparison.measures[0])
    files: dict[str, Any] = {"markdown": out / f"{prefix}comparison.md", "csv": out / f"{prefix}comparison.csv",
                             "latex": out / f"{prefix}comparison.tex"}
    write_text(files["markdown"], comparison.to_markdown() + "\n")
    write_text(files["csv"], comparison.to_csv())
    write_text(files["latex"], comparison.to_latex())
    files["plots"] = plot_breakdowns(comparison.results, measure, out, prefix=prefix)
    for kind, breakdown in (("per_turn", by_position), ("per_conversation", by_conversation)):
        series = {name: breakdown(r, measure) for name, r in comparison.results.items()}
        keys = sorted({k for s in series.values() for k in s}, key=lambda k: natural_key(str(k)))
        table = io.StringIO()
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow([kind.split("_", 1)[1], *series])
        writer.writerows([[k, *(f"{s.get(k, float('nan')):.4f}" for s in series.values())] for k in keys])
        files[kind] = out / f"{prefix}{kind}.csv"
        write_text(files[kind], table.getvalue())
    return files


def write_report(runs: dict[str, Any], qrels: Any, out: Path, ptkb_qrels: Any = None, topics: Any = None,
                 responses: Comparison | None = None, **options: Any) -> Path:
    """The manual-vs-automatic report: one HTML file with the tables and the plots embedded; ``qrels`` None leaves
    the ranking sections out, ``responses`` (a ``compare_responses`` result) adds the response measures."""
    sections: list[str] = []
    plots: list[Path] = []
    if qrels is not None:
        comparison = compare_runs(runs, qrels, **options)
        plots += write_comparison(comparison, out)["plots"]
        sections.append(_table_html("Passage ranking", comparison))
        if ptkb_qrels is not None:
            ptkb = compare_ptkb(runs, ptkb_qrels, topics, baseline=comparison.baseline, test=comparison.test,
                                correction=comparison.correction, missing=options.get("missing", "skip"))
            plots += write_comparison(ptkb, out, prefix="ptkb_")["plots"]
            sections.append(_table_html("PTKB statement ranking", ptkb))
    if responses is not None:
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


def _table_html(title: str, comparison: Comparison) -> str:
    rows = comparison.table()
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    note = (f"* p &lt; 0.05 against {html.escape(comparison.baseline)} ({comparison.test}, {comparison.correction} "
            "correction); (wins/ties/losses) per judged turn"
            + ("; judged@k: fraction of the top k with a judgement." if comparison.judged else "."))
    return f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{body}</table><p>{note}</p>"

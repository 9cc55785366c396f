"""Write a comparison to files: Markdown, CSV, LaTeX, breakdown plots and tables, one self-contained HTML."""

from __future__ import annotations

import base64
import csv
import html
import io
import os
from pathlib import Path
from typing import Any

from ikatkit.atomic import write_text
from ikatkit.evaluate.compare import JUDGED_DEPTHS, Comparison, compare_ptkb, compare_runs
from ikatkit.evaluate.plots import (KINDS, SECTIONS, Area, by_conversation, by_position, natural_key, place,
                                    plot_breakdowns, plot_caption)


def write_comparison(comparison: Comparison, out: Path, prefix: str = "") -> dict[str, Any]:
    """All files of a comparison in ``out`` (names start with ``prefix``): Markdown, CSV and LaTeX tables (and
    the all-pairs CSV), per-turn-position and per-conversation tables of every measure with the count of judged
    turns behind each value, and two plots per measure."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {"markdown": out / f"{prefix}comparison.md", "csv": out / f"{prefix}comparison.csv",
                             "latex": out / f"{prefix}comparison.tex"}
    write_text(files["markdown"], comparison.to_markdown(full=True) + "\n")
    write_text(files["csv"], comparison.to_csv())
    write_text(files["latex"], comparison.to_latex())
    if comparison.pairs:
        files["pairs"] = out / f"{prefix}pairs.csv"
        write_text(files["pairs"], comparison.pairs_csv())
    files["areas"] = {}
    files["plots"] = [path for measure in comparison.measures
                      for path in plot_breakdowns(comparison.results, measure, out, prefix=prefix,
                                                  areas=files["areas"])]
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
                 responses: Comparison | None = None, viewer: Path | None = None, **options: Any) -> Path:
    """The manual-vs-automatic report: one HTML file with the runs compared (type, description, file, judged turns
    ranked and not, judged@k) and the qrels, per comparison the compact table (runs x measures, significance marks)
    and one row per run and measure, and every plot embedded with a caption in words; ``qrels`` None leaves the
    ranking sections out, ``responses`` (a ``compare_responses`` result) adds the response measures. With a viewer
    (``viewer``, else ``out/viewer`` when it holds one: ``ikatkit view``), each plot's turn positions and
    conversations link to a table of the turns behind them, and each turn to its page in the viewer."""
    viewer = viewer if viewer is not None else out / "viewer" if (out / "viewer" / "index.html").is_file() else None
    link = Path(os.path.relpath(viewer, out)).as_posix() if viewer is not None else None
    sections: list[str] = []
    plots: list[tuple[Path, str, list[Area], str]] = []
    comparisons: list[tuple[str, Comparison]] = []
    if qrels is not None:
        comparison = compare_runs(runs, qrels, **options)
        ptkb = None
        if ptkb_qrels is not None:
            ptkb = compare_ptkb(runs, ptkb_qrels, topics, baseline=comparison.baseline, test=comparison.test,
                                correction=comparison.correction, missing=options.get("missing", "skip"),
                                all_pairs=options.get("all_pairs", False))
        sections.append(_sources_html(runs, comparison, ptkb))
        comparisons.append(("", comparison))
        if ptkb is not None:
            comparisons.append(("ptkb_", ptkb))
    if responses is not None:
        if qrels is None:
            sections.append(_sources_html(runs, responses, None))
        comparisons.append(("responses_", responses))
    for prefix, item in comparisons:
        files = write_comparison(item, out, prefix=prefix)
        plots += [(path, caption, files["areas"][path], prefix) for path, caption in zip(files["plots"],
                                                                                         files["captions"])]
        sections.append(_table_html(SECTIONS[prefix], item))
    for path, caption, areas, prefix in plots:
        data = base64.b64encode(Path(path).read_bytes()).decode()
        links = ""
        if link is not None:
            kind = "turn" if path.stem.endswith("_per_turn") else "conversation"
            links = "".join(f'<a class=area href="#{prefix}{kind}-{html.escape(key)}" title="{html.escape(key)}" '
                            f'style="left:{x:.2%};top:{y:.2%};width:{w:.2%};height:{h:.2%}"></a>'
                            for key, (x, y, w, h) in areas)
        sections.append(f'<figure><div class=plot><img alt="{html.escape(caption)}" src="data:image/png;base64,'
                        f'{data}">{links}</div><figcaption>{html.escape(caption)}</figcaption></figure>')
    if link is not None:
        sections += [_turns_html(prefix, item, link) for prefix, item in comparisons]
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>ikatkit report</title><style>"
            "body{font-family:sans-serif;max-width:1300px;margin:2em auto;padding:0 1em}"
            ".box{max-width:100%;overflow-x:auto}table{border-collapse:collapse;margin:0.5em 0}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;white-space:nowrap}"
            "td:first-child,th:first-child,.text{text-align:left}"
            "th{white-space:normal}.wrap{max-width:20em;white-space:normal;text-align:left}.seg{white-space:nowrap}"
            "figure{margin:1em 0}img{max-width:100%;display:block}figcaption{font-style:italic}"
            ".plot{position:relative;display:inline-block;max-width:100%}.area{position:absolute}"
            ".area:hover{background:rgba(0,0,0,.08)}tr:target{background:#fffbe6}"
            "</style></head><body><h1>Run comparison</h1>" + "".join(sections) + "</body></html>")
    path = out / "report.html"
    write_text(path, page)
    return path


def _turns_html(prefix: str, comparison: Comparison, viewer: str) -> str:
    """Every turn behind the plots of a comparison, grouped by turn position (each group the target of a
    position's link) and linked to its page in the viewer, with each run's values."""
    from ikatkit.turn_pages import page_file, turn_url

    names = list(comparison.results)
    head = "".join(f"<th>{html.escape(m)} {html.escape(n)}</th>" for m in comparison.measures for n in names)
    qids = sorted({q for r in comparison.results.values() for q in r.per_query}, key=natural_key)
    rows, seen = [], set()
    for qid in sorted(qids, key=lambda q: (place(q)[1] or 0, natural_key(q))):
        conversation, turn = place(qid)
        anchors = []
        for kind, key in (("turn", str(turn)), ("conversation", conversation)):
            if turn is not None or kind == "conversation":
                if (kind, key) not in seen:
                    seen.add((kind, key))
                    anchors.append(f"{prefix}{kind}-{key}")
        url = f"{viewer}/{turn_url(qid) if turn is not None else page_file(conversation)}"
        cells = "".join(f"<td>{_value(comparison, n, qid, m)}</td>" for m in comparison.measures for n in names)
        ids = "".join(f'<span id="{html.escape(a)}"></span>' for a in anchors[1:])
        first = f' id="{html.escape(anchors[0])}"' if anchors else ""
        rows.append(f'<tr{first}><td>{ids}<a href="{html.escape(url)}">{html.escape(qid)}</a></td>'
                    f"<td>{turn if turn is not None else ''}</td>{cells}</tr>")
    return (f"<h2>{html.escape(SECTIONS[prefix])}: every turn, linked to the viewer</h2><div class=box><table>"
            f"<tr><th>turn</th><th>position</th>{head}</tr>{''.join(rows)}</table></div>")


def _value(comparison: Comparison, name: str, qid: str, measure: str) -> str:
    value = comparison.results[name].per_query.get(qid, {}).get(measure)
    return "" if value is None else f"{value:.4f}"


def _rows_html(rows: list[list[str]], classes: dict[int, str] | None = None, paths: set[int] | None = None) -> str:
    """A table in a box that scrolls sideways rather than spill out of the page (``classes``: column -> class;
    ``paths``: columns of file paths, which break after a ``/`` only)."""
    classes, paths = classes or {}, paths or set()
    head = "".join(f"<th{f' class={classes[i]}' if i in classes else ''}>{html.escape(c)}</th>"
                   for i, c in enumerate(rows[0]))
    body = "".join("<tr>" + "".join(f"<td{f' class={classes[i]}' if i in classes else ''}>"
                                    f"{_path_html(c) if i in paths else html.escape(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows[1:])
    return f"<div class=box><table><tr>{head}</tr>{body}</table></div>"


def _path_html(path: str) -> str:
    """A file path that may break after each ``/`` and nowhere else."""
    parts = path.split("/")
    return "/<wbr>".join(f"<span class=seg>{html.escape(p)}</span>" for p in parts)


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
        first = records[0][1] if isinstance(records, list) and records else {}
        if isinstance(first, dict):
            metadata = first.get("metadata")
            meta = metadata if isinstance(metadata, dict) else first
            description = str(meta.get("description") or meta.get("run_description") or "")
        if not description:
            from ikatkit.runs.manifest import description_of, manifest_of

            manifest = manifest_of(run)
            description = description_of(manifest) if manifest else ""
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
    return (f"<h2>Runs</h2>{_rows_html(rows, {1: 'text', 2: 'wrap', 3: 'wrap'}, paths={3})}<p>{html.escape(qrels)}</p>"
            "<p>judged@k: share of a run's top k passages that are judged, over the judged turns it ranks.</p>")


def _table_html(title: str, comparison: Comparison) -> str:
    """The compact table (runs x measures, significance marks), then one row per run and measure."""
    note = html.escape(comparison.note())
    pairs = f"<h3>All pairs</h3>{_rows_html(comparison.pairs_table())}" if comparison.pairs else ""
    return (f"<h2>{html.escape(title)}</h2>{_rows_html(comparison.compact())}<p>{note}</p>"
            f"<h3>Per run and measure</h3>{_rows_html(comparison.long_table(), {1: 'text'})}"
            "<p>95% CI: Student-t interval of the mean; wins/ties/losses per turn against the baseline.</p>" + pairs)

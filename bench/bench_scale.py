"""Every command's cost as the collection grows (issue 41), on realistic synthetic collections (bench/realistic.py):
index build beside Anserini's IndexCollection, search (ikatkit, Java alone, LuceneSearcher; k=100/1000; one thread
and batch), Lucene's pruning against an exhaustive search, the first query on a cold and a warm page cache,
``validate --index`` of a full-year run, ``index stats`` (own and foreign), ``index verify`` (plain and .bz2 hashes).
Prints one JSON: the figures per size, the ratios measured in the same run, a fitted exponent per figure and its
extrapolation to the organizers' 116,838,987 passages. Collections and indexes live under ``--root`` (outside the
repository), rebuilt from the seed when absent; the free disk space is checked first.

    python bench/bench_scale.py --passages 200000 2000000 [20000000] [--root /work/scale-indexes] [--out scale.json]
        [--figure bench/figures/scale.png] [--skip anserini]
    python bench/bench_scale.py --report scale.json scale-10m.json --out merged.json --figure scale.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import ProcessTree, drop_cache, interleaved, machine_busy_s, print_json, timed  # noqa: E402
from realistic import Generator, check, write  # noqa: E402

ORGANIZERS = 116_838_987
BYTES_PER_PASSAGE = 6000  # text + hashes + two indexes (ikatkit's, Anserini's): 5.5 KB a passage at 2M
ANSERINI_BYTES = 2100  # Anserini's index alone: 2.03 KB a passage at 2M
TOPICS = Path(os.environ.get("IKAT_DATA", Path(__file__).resolve().parents[2] / "shared" / "ikat")) / "2023" / \
    "test_topics.json"
CLI = "import sys; from ikatkit.cli import main; sys.exit(main())"
MAX_INT = 2147483647


def disk_check(root: Path, sizes: Sequence[int], anserini: bool = True) -> dict[str, Any]:
    """What the sizes not yet built need on disk against what is free; exits when short."""
    root.mkdir(parents=True, exist_ok=True)
    per_passage = BYTES_PER_PASSAGE - (0 if anserini else ANSERINI_BYTES)
    needed = sum(max(0, n * per_passage - du(root / f"r{n}")) for n in sizes  # less what is already there
                 if not (root / f"r{n}" / "done.json").exists())
    free = shutil.disk_usage(root).free
    found = {"root": str(root), "needed_gb": round(needed / 1e9, 1), "free_gb": round(free / 1e9, 1)}
    if needed > free * 0.9:
        sys.exit(f"bench_scale: {root} has {free / 1e9:.1f} GB free; sizes {list(sizes)} need about "
                 f"{needed / 1e9:.1f} GB ({per_passage} B a passage): free space, pass smaller --passages or "
                 "--skip anserini")
    return found


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def command(args: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """An ``ikatkit`` command in a subprocess: seconds, exit code, peak RSS (MiB) of its Python and Java."""
    with ProcessTree() as tree:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True,
                              env={**os.environ, **(env or {})})
        seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 2), "exit": done.returncode,
            "peak_rss_mib": round(tree.peak_rss_mib["children"] + tree.peak_rss_mib["java"], 1),
            "tail": done.stdout.strip().splitlines()[-3:] if done.returncode not in (0, 1) or "verify" in args
            else done.stdout.strip().splitlines()[-1:]}


def build(folder: Path, n: int, threads: int, anserini: bool = True) -> dict[str, Any]:
    """ikatkit's ``index build`` and Anserini's IndexCollection alone on the same JSONL (``anserini``)."""
    from ikatkit.index.anserini import run_anserini

    source = folder / "passages" / "passages.jsonl"
    found: dict[str, Any] = {}
    own, foreign = folder / "index", folder / "anserini"
    for name, target in (("ikatkit", own), ("anserini", foreign))[:2 if anserini else 1]:
        if (target / "segments.gen").exists() or any(target.glob("segments_*")):
            found[name] = json.loads((folder / f"build-{name}.json").read_text())
            continue
        shutil.rmtree(target, ignore_errors=True)
        busy = machine_busy_s()
        with ProcessTree() as tree:
            start = time.perf_counter()
            if name == "ikatkit":
                done = subprocess.run([sys.executable, "-c", CLI, "index", "build", str(source), "--out", str(own),
                                       "--threads", str(threads)], capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"index build failed: {done.stderr[-2000:]}")
            else:
                run_anserini(source.parent, foreign, threads, n)
            seconds = time.perf_counter() - start
        report = {"seconds": round(seconds, 1), "passages_per_s": round(n / seconds),
                  "peak_rss_mib": {"python": round(tree.peak_rss_mib["children"] if name == "ikatkit"
                                                   else tree.peak_rss_mib["self"], 1),
                                   "java": round(tree.peak_rss_mib["java"], 1)},
                  "machine_load": round((machine_busy_s() - busy) / seconds, 2),
                  "index_bytes": du(target)}
        (folder / f"build-{name}.json").write_text(json.dumps(report))
        found[name] = report
    if anserini:
        found["ratio_vs_anserini"] = round(found["ikatkit"]["passages_per_s"] / found["anserini"]["passages_per_s"], 3)
    return found


def best_of(repeats: int, sides: dict[str, Callable[[], Any]]) -> tuple[dict[str, float], dict[str, Any]]:
    """Each side timed ``repeats`` times, the sides alternating; (fastest seconds, a result) per side."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    results: dict[str, Any] = {}
    for _ in range(repeats):
        for name, function in sides.items():
            seconds, results[name] = timed(function)
            times[name].append(seconds)
    return {name: min(values) for name, values in times.items()}, results


def search(index: Path, queries: list[str], repeats: int, threads: int) -> dict[str, Any]:
    """q/s of ikatkit and the same search in Java alone, one thread (:func:`common.interleaved`, ikatkit's results
    kept alive as a batch's are) and batch (:func:`best_of` whole batches), k=100 and 1000; LuceneSearcher in a
    pass of its own after them: run between them, it slows ikatkit more than Java alone (``search_paths.py
    --lucene-between``, docs/benchmarks.md), and no ikatkit run has it beside."""
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.retrieve.lucene import SPARE

    searcher = Bm25Searcher(index, threads=threads)
    lucene, top = searcher.pyserini, searcher.lucene

    def parse(query: str) -> Any:  # Anserini's bag-of-words query, as the searcher builds it
        return searcher.generator.buildQuery("contents", searcher.analyzer, query)

    found: dict[str, Any] = {"queries": len(queries), "threads_batch": threads}
    for query in queries[:20]:  # JIT warm-up, both paths
        lucene.search(query, 1000), searcher.search(query, 1000)
    for k in (100, 1000):
        best, kept = interleaved(queries, {
            "ikatkit": lambda q: searcher.search(q, k),
            "java_alone": lambda q: top.top_hits.search(top.searcher, parse(q), k, SPARE, top.sort, "id")},
            repeats, keep={"ikatkit"})
        best.update(interleaved(queries, {"lucene_searcher": lambda q: lucene.search(q, k)}, repeats)[0])
        same = all([(h.docid, float(h.score)) for h in lucene.search(q, k)] == mine
                   for q, mine in zip(queries, kept["ikatkit"]))
        found[f"k={k}"] = ratios(len(queries), best, same)
        batch = dict(enumerate(queries))
        best, results = best_of(repeats, {
            "ikatkit": lambda: searcher.batch_search(batch, k),
            "java_alone": lambda: top.top_hits.submit(top.searcher, [parse(q) for q in queries], k, SPARE, top.sort,
                                                      "id", threads).all()})
        reference = best_of(repeats, {
            "lucene_searcher": lambda: lucene.batch_search(queries, [str(i) for i in batch], k, threads)})
        best.update(reference[0])
        same = all([(h.docid, float(h.score)) for h in reference[1]["lucene_searcher"][str(i)]]
                   == results["ikatkit"][i] for i in batch)
        found[f"batch k={k}"] = ratios(len(queries), best, same)
    found["pruning"] = pruning(searcher, [parse(q) for q in queries], repeats)
    return found


def ratios(queries: int, best: dict[str, float], same: bool) -> dict[str, Any]:
    """q/s of each side and ikatkit's ratios to Java alone and to LuceneSearcher."""
    return {**{f"{name}_q_per_s": round(queries / seconds, 1) for name, seconds in best.items()},
            "ikatkit_vs_java_alone": round(best["java_alone"] / best["ikatkit"], 3),
            "ikatkit_vs_lucene_searcher": round(best["lucene_searcher"] / best["ikatkit"], 2),
            "same_ids_and_scores": same}


def pruning(searcher: Any, built: list[Any], repeats: int) -> dict[str, Any]:
    """Lucene's top-k search as ikatkit runs it (``search(query, k + spare)``: block-max WAND / MaxScore once 1000
    hits are collected) and as Anserini's LuceneSearcher does (sorted by score, then id) against an exhaustive
    one (a collector that counts every hit, so nothing is skipped): time, hits counted, same top k."""
    from jnius import cast

    from ikatkit.java import autoclass
    from ikatkit.retrieve.lucene import SPARE

    collector = autoclass("org.apache.lucene.search.TopScoreDocCollector")
    index_searcher = searcher.lucene.searcher
    found: dict[str, Any] = {}
    for k in (100, 1000):
        n = k + SPARE

        def exhaustive(query: Any) -> Any:
            sink = collector.create(n, MAX_INT)
            index_searcher.search(query, cast("org.apache.lucene.search.Collector", sink))
            return sink.topDocs()

        best, results = best_of(repeats, {
            "exhaustive": lambda: [exhaustive(q) for q in built],
            "pruned": lambda: [index_searcher.search(q, n) for q in built],
            "anserini_sorted": lambda: [index_searcher.search(q, k, searcher.lucene.sort, True) for q in built]})
        same = all(_top(a) == _top(b) for a, b in zip(results["exhaustive"], results["pruned"]))
        counted = {name: sum(int(t.totalHits.value) for t in tops) for name, tops in results.items()}
        skipped = {name: sum(t.totalHits.relation.toString() != "EQUAL_TO" for t in tops)
                   for name, tops in results.items()}
        found[f"k={k}"] = {**{f"{name}_q_per_s": round(len(built) / s, 1) for name, s in best.items()},
                           "speedup_pruned": round(best["exhaustive"] / best["pruned"], 2),
                           "speedup_anserini_sorted": round(best["exhaustive"] / best["anserini_sorted"], 2),
                           "hits_counted": counted, "queries_that_skipped": skipped,
                           "same_top_k_as_exhaustive": same}
    return found


def _top(top_docs: Any) -> list[tuple[int, float]]:
    """(doc, score) of each hit, in the collector's order (score descending, then doc id ascending)."""
    return [(d.doc, d.score) for d in top_docs.scoreDocs]


def first_query(index: Path, queries: list[str]) -> dict[str, Any]:
    """The first query of a fresh process (JVM start and index open not counted), its page cache emptied of the
    index's files first (cold: posix_fadvise DONTNEED, which needs no root) and then as left warm by that run."""
    script = ("import json, sys, time; from ikatkit.retrieve.bm25 import Bm25Searcher; s = Bm25Searcher(sys.argv[1]); "
              "t = time.perf_counter(); s.search(sys.argv[2], 1000); first = time.perf_counter() - t; "
              "t = time.perf_counter(); s.search(sys.argv[3], 1000); "
              "print(json.dumps([first, time.perf_counter() - t]))")
    found: dict[str, Any] = {"method": "posix_fadvise(POSIX_FADV_DONTNEED) on every index file"}
    for state in ("cold", "warm"):
        if state == "cold":
            drop_cache(index)
        done = subprocess.run([sys.executable, "-c", script, str(index), queries[0], queries[1]],
                              capture_output=True, text=True, check=True)
        first, second = json.loads(done.stdout.strip().splitlines()[-1])
        found[state] = {"first_query_s": round(first, 3), "second_query_s": round(second, 3)}
    found["index_bytes"] = du(index)
    return found


def commands(folder: Path, anserini: bool = True) -> dict[str, Any]:
    """``search`` of the 2023 year (332 turns, k=1000, the real rewrites), ``validate --index`` and ``--ids`` of
    that run, ``index stats`` of both indexes (``anserini``), ``index verify`` against plain and .bz2 hashes."""
    own, foreign, run = folder / "index", folder / "anserini", folder / "year.trec"
    found = {"search_year_k1000": command(["search", "--index", str(own), "--topics", str(TOPICS), "--queries",
                                           "manual", "--k", "1000", "--out", str(run)])}
    found["validate_index"] = command(["validate", str(run), "--topics", str(TOPICS), "--index", str(own)])
    found["validate_ids_bz2"] = command(["validate", str(run), "--topics", str(TOPICS), "--ids",
                                         str(folder / "hashes.tsv.bz2")])
    found["stats_own"] = command(["index", "stats", str(own)])
    if anserini:
        found["stats_foreign"] = command(["index", "stats", str(foreign)])
        found["validate_index_foreign"] = command(["validate", str(run), "--topics", str(TOPICS), "--index",
                                                   str(foreign)])
    for name in ("hashes.tsv", "hashes.tsv.bz2"):
        found[f"verify_{name}"] = command(["index", "verify", str(own), "--hashes", str(folder / name)])
    return found


def exponents(sizes: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per figure (seconds, peak RSS, bytes), the exponent of ``figure ~ passages^e`` between the sizes measured
    (least squares in log-log) and its value extrapolated to the organizers' collection."""
    import numpy as np

    flat: dict[str, dict[int, float]] = {}
    for n, figures in sizes.items():
        for name, value in _leaves(figures):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and _scales(name):
                flat.setdefault(name, {})[int(n)] = float(value)
    found = {}
    for name, points in flat.items():
        if len(points) >= 2:
            x, y = np.log(list(points)), np.log(list(points.values()))
            slope, intercept = np.polyfit(x, y, 1)
            found[name] = {"exponent": round(float(slope), 2),
                           "at_116.8M": float(f"{math.exp(intercept + slope * math.log(ORGANIZERS)):.3g}")}
    return found


def _scales(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf in ("seconds", "peak_rss_mib", "index_bytes", "first_query_s", "python", "java") or \
        leaf.endswith("q_per_s")


def _leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(tree, dict):
        return [leaf for key, value in tree.items() for leaf in _leaves(value, f"{prefix}.{key}" if prefix else key)]
    return [(prefix, tree)]


PLOTTED = {  # label: path in a size's figures
    "index build (ikatkit)": "build.ikatkit.seconds", "IndexCollection alone": "build.anserini.seconds",
    "search k=1000, 100 queries (ikatkit)": "search.k=1000.ikatkit_q_per_s",
    "validate --index (year)": "commands.validate_index.seconds",
    "index verify (.bz2)": "commands.verify_hashes.tsv.bz2.seconds",
    "index stats (foreign)": "commands.stats_foreign.seconds"}


def plot(report: dict[str, Any], path: Path) -> None:
    """Seconds per command against passages, log-log, with the 116.8M extrapolation dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    sizes = sorted(report["sizes"], key=int)
    leaves = {n: dict(_leaves(report["sizes"][n])) for n in sizes}
    for label, key in PLOTTED.items():
        measured = [n for n in sizes if leaves[n].get(key) is not None]  # a size may have skipped the step
        values = [leaves[n][key] for n in measured]
        if not values:
            continue
        if key.endswith("q_per_s"):  # as seconds for the 100 queries
            values = [report["sizes"][n]["search"]["queries"] / v for n, v in zip(measured, values)]
        line, = axes.plot([int(n) for n in measured], values, marker="o", label=label)
        fit = report["fits"].get(key)
        if fit and not key.endswith("q_per_s"):
            axes.plot([int(measured[-1]), ORGANIZERS], [values[-1], fit["at_116.8M"]], linestyle="--",
                      color=line.get_color())
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("passages")
    axes.set_ylabel("seconds")
    axes.set_title("ikatkit commands on realistic synthetic collections (dashed: fitted, to 116.8M)")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, nargs="+", default=[200000, 2000000])
    parser.add_argument("--root", type=Path, default=Path("/work/scale-indexes"))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip", nargs="*", default=[], choices=["search", "cold", "commands", "anserini"],
                        help="steps left out (anserini: its IndexCollection build and the foreign-index commands, "
                             "when the disk is short)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--figure", type=Path, help="draw the log-log figure here (from --report if given)")
    parser.add_argument("--report", type=Path, nargs="+",
                        help="JSONs this bench wrote: merge their sizes (a later file's figures win, step by step), "
                             "refit the exponents, print the merged JSON (and --out) and draw --figure; nothing is "
                             "measured")
    args = parser.parse_args()
    if args.report:
        reports = [json.loads(path.read_text()) for path in args.report]
        sizes: dict[str, Any] = {}
        for report in reports:
            for n, figures in report["sizes"].items():
                sizes[n] = merge(sizes.get(n, {}), figures)
        merged = {**reports[0], "merged_from": [str(path) for path in args.report], "sizes": sizes}
        merged["fits"] = exponents(merged["sizes"])
        finish(merged, args.out, args.figure)
        return
    anserini = "anserini" not in args.skip
    report: dict[str, Any] = {"disk": disk_check(args.root, args.passages, anserini), "generator": check(),
                              "load_average_start": os.getloadavg()[0], "sizes": {}}
    for n in sorted(args.passages):
        folder = args.root / f"r{n}"
        if not (folder / "generated.json").exists():
            seconds, written = timed(lambda: write(folder, n))
            (folder / "generated.json").write_text(json.dumps({**written, "seconds": round(seconds, 1)}))
        figures: dict[str, Any] = {"collection": json.loads((folder / "generated.json").read_text())}
        figures["build"] = build(folder, n, args.threads, anserini)
        queries = Generator(n).queries(args.queries)
        if "search" not in args.skip:
            figures["search"] = search(folder / "index", queries, args.repeats, args.threads)
        if "cold" not in args.skip:
            figures["first_query"] = first_query(folder / "index", queries[-2:])
        if "commands" not in args.skip:
            figures["commands"] = commands(folder, anserini)
        if not set(args.skip) - {"anserini"}:
            (folder / "done.json").write_text(json.dumps(figures))
        report["sizes"][n] = figures
        print(json.dumps({n: figures}), file=sys.stderr, flush=True)
    report["load_average_end"] = os.getloadavg()[0]
    report["fits"] = exponents(report["sizes"])
    finish(report, args.out, args.figure)


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old`` updated by ``new`` at every depth (a step measured again replaces only its own figures)."""
    return {**old, **{key: merge(old[key], value) if isinstance(value, dict) and isinstance(old.get(key), dict)
                      else value for key, value in new.items()}}


def finish(report: dict[str, Any], out: Path | None, figure: Path | None) -> None:
    """Print the report's JSON, write it to ``out`` and draw ``figure`` where given."""
    print_json(report, out)
    if figure:
        plot(report, figure)


if __name__ == "__main__":
    main()

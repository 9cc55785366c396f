"""What context selection adds to a BM25-only run: the anchor is ``raw_query -> retrieve (k=1000) -> respond
(extractive)`` over the iKAT 2023 test topics; each method runs the same with ``select_context`` first, in the
same process (models and JVM warm), and reports the ``select_context`` stage's seconds (from the run's
manifest) as a fraction of the other stages' in the same run, beside the wall times.

    python bench/bench_context.py [--index DIR] [--methods last coherence cascade_limit] [--scorers ranker lexical]

The scored methods (cascade, cascade_limit, coherence) run once per ``--scorers`` value: ``ranker`` (the
all-MiniLM-L6-v2 bi-encoder resource) and ``lexical`` (TF-IDF cosine over the index, no model), each at its
threshold (and passages per turn) tuned on the 2023 train topics. The cache is fresh: nothing is encoded before the
timed runs.

Without --index it indexes the 894 real provenance passages of ../shared/ikat/2023 (as tests/conftest.py does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import provenance_jsonl, timed  # noqa: E402

from ikatkit.pipelines import run_pipeline  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "ikat" / "2023"
CONFIG = """
name = "bench-context"
run_type = "{run_type}"
batch_size = 16

[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"

[resources.bm25]
kind = "bm25"
{select}
[[stages]]
stage = "raw_query"

[[stages]]
stage = "retrieve"
k = 1000
expand_ptkb = false

[[stages]]
stage = "respond"
task = "extractive"
"""
SELECT = ('\n[[stages]]\nstage = "select_context"\nmethod = "{method}"\nthreshold = {threshold}\n'
          'passages = {passages}\nscorer = "{scorer}"\n')
SCORED = ("cascade", "cascade_limit", "coherence")
# threshold and passages per turn tuned on the 2023 train topics (README, "Dialogue context selection")
TUNED = {("cascade", "ranker"): (0.7, 10), ("coherence", "ranker"): (0.1, 10), ("cascade", "lexical"): (0.3, 3),
         ("coherence", "lexical"): (0.3, 10)}


def index_provenance(data: Path, work: Path) -> Path:
    from ikatkit.index.build import build_index

    with contextlib.redirect_stdout(sys.stderr):  # stdout is the report's JSON
        build_index([provenance_jsonl(data, work / "passages.jsonl")], work / "index", threads=2)
    return work / "index"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="iKAT 2023 folder (topics, provenance passages)")
    parser.add_argument("--index", type=Path, help="an existing index (else the 894 provenance passages)")
    parser.add_argument("--methods", nargs="+", default=["last", "oracle", "coherence", "cascade_limit"])
    parser.add_argument("--scorers", nargs="+", choices=["ranker", "lexical"], default=["ranker", "lexical"],
                        help="the scored methods' scorer (select_context's scorer option); a row per value")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ikatkit-bench-context-"))
    os.environ["IKATKIT_CACHE"] = str(work / "cache")  # nothing cached from earlier runs (the bi-encoder's embeddings)
    try:
        index = args.index or index_provenance(args.data, work)
        topics = args.data / "test_topics.json"

        def run(name: str, method: str | None, scorer: str = "ranker") -> tuple[float, dict[str, float]]:
            config = work / f"{name}.toml"
            threshold, passages = TUNED.get((method.removesuffix("_limit"), scorer), (0.5, 10)) if method else (0, 0)
            select = SELECT.format(method=method, threshold=threshold, passages=passages,
                                   scorer=scorer) if method else ""
            run_type = "manual" if method in ("oracle", "oracle_qrels") else "automatic"
            config.write_text(CONFIG.format(run_type=run_type, select=select))
            seconds, outcome = timed(lambda: run_pipeline(config, topics, work / name, index=index, validate=False))
            return seconds, json.loads(outcome.manifest_file.read_text())["seconds_per_stage"]

        run("warm-up", None)
        anchor, _ = run("anchor", None)
        from ikatkit.topics import load_topics

        report: dict[str, object] = {"turns": len(load_topics(topics)), "bm25_only_wall_s": round(anchor, 2)}
        # what the goal reads: the stage's seconds against the BM25-only run's wall time
        rows = [(f"{m} ({s})" if m in SCORED else m, m, s) for m in args.methods
                for s in (args.scorers if m in SCORED else ["ranker"])]
        for row, method, scorer in rows:
            seconds, stages = run(row.replace(" (", "-").rstrip(")"), method, scorer)
            select = stages.pop("select_context")
            # the stage's own time against the other stages of the same run: robust to load between runs
            report[row] = {"wall_s": round(seconds, 2), "select_s": select,
                           "other_stages_s": round(sum(stages.values()), 3),
                           "select_fraction": round(select / sum(stages.values()), 4),
                           "select_of_bm25_only_wall": round(select / anchor, 4),
                           "wall_added_fraction": round((seconds - anchor) / anchor, 4)}
        report["bm25_only_again_wall_s"] = round(run("anchor-again", None)[0], 2)
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

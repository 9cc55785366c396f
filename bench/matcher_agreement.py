"""The agreement table of docs/response-agreement.md: ``ikatkit eval-matcher`` for each matcher, on all labels and on
the tags mapped to runs by name, as a Markdown table (each row's command is ``ikatkit eval-matcher LABELS
--nuggets ... --responses ... --matcher M [--threshold T] [--tags ...] --format json``).

``--llm``: the LLM judge rows instead, the bundled SmolLM2-135M served by a llama.cpp server this script starts on
loopback with one thread (``ikatkit.llm.server.llama_cpp_server``), judged through the openai backend
(``--matcher llm --llm-config`` a TOML naming the server; outputs cached in eval-matcher's cache folder); each
row's wall seconds and the judge's calls and parse fallbacks go to stderr.

    PYTHONPATH=src python bench/matcher_agreement.py [../shared/ikat/2024-nuggets] [--llm] [extra rows as JSON files]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from ikatkit.cli import main

ROWS = (("embedding", []), ("embedding", ["--threshold", "cv"]), ("lexical", []), ("lexical", ["--threshold", "cv"]))
SUBSETS = (("all tags", []), ("tags mapped by name (ksu-1, nii-1)", ["--tags", "ksu-1", "nii-1"]))


def run(folder: Path, matcher: str, extra: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["eval-matcher", str(folder / "human_matching_labels.dev.txt"), "--nuggets",
              str(folder / "gold_nuggets_human.json"), "--responses", str(folder / "automatic_responses.json"),
              str(folder / "manual_responses.json"), "--matcher", matcher, *extra, "--format", "json"])
    return json.loads(out.getvalue())


def row(name: str, subset: str, r: dict) -> str:
    tau = "" if r["run_tau"] is None else f"{r['run_tau']:.2f}"
    auc = "" if r.get("auc") is None else f"{r['auc']:.3f}"
    return (f"| {name} | {subset} | {r['pairs']} | {r['accuracy']:.3f} | {r['balanced_accuracy']:.3f} | "
            f"{r['precision']:.3f} | {r['recall']:.3f} | **{r['kappa']:.3f}** [{r['kappa_ci'][0]:.2f}, "
            f"{r['kappa_ci'][1]:.2f}] | {tau} | {auc} |")


def llm_rows(folder: Path) -> None:
    """SmolLM2-135M as the judge, through a one-thread llama.cpp server on loopback."""
    from ikatkit.llm.server import llama_cpp_server

    with tempfile.TemporaryDirectory() as tmp, llama_cpp_server("bundled:smollm2", n_threads=1) as url:
        config = Path(tmp) / "smollm2-llama-cpp.toml"
        config.write_text(f'backend = "openai"\nmodel = "smollm2"\nbase_url = "{url}"\nmax_concurrency = 1\n',
                          encoding="utf-8")
        for subset, tags in SUBSETS:
            start = time.perf_counter()
            r = run(folder, "llm", ["--llm-config", str(config), *tags])
            print(f"{subset}: {time.perf_counter() - start:.0f} s wall, judge {r['llm']}", file=sys.stderr)
            print(row("LLM SmolLM2-135M (llama.cpp, nugget_support prompt)", subset, r))


def main_table(folder: Path, extra_files: list[str], llm: bool = False) -> None:
    print("| matcher | labels | pairs | accuracy | bal. acc. | precision | recall | kappa [95% CI] | run tau | AUC |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    if llm:
        llm_rows(folder)
        return
    for subset, tags in SUBSETS:
        for matcher, extra in ROWS:
            r = run(folder, matcher, extra + tags)
            threshold = "LOCO-CV" if r["threshold"] == "cv" else f"{r['threshold']:g}"
            print(row(f"{matcher} @ {threshold}", subset, r))
    for path in extra_files:
        r = json.loads(Path(path).read_text(encoding="utf-8"))
        print(row(r["matcher"], Path(path).stem, r))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--llm"]
    main_table(Path(args[0] if args else "../shared/ikat/2024-nuggets"), args[1:], "--llm" in sys.argv[1:])

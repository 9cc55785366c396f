"""The agreement table of docs/response-agreement.md: ``ikatkit eval-matcher`` for each matcher, on all labels and on
the tags mapped to runs by name, as a Markdown table (each row's command is ``ikatkit eval-matcher LABELS
--nuggets ... --responses ... --matcher M [--threshold T] [--tags ...] --format json``).

    PYTHONPATH=src python bench/matcher_agreement.py [../shared/ikat/2024-nuggets] [extra rows as JSON files]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
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


def main_table(folder: Path, extra_files: list[str]) -> None:
    print("| matcher | labels | pairs | accuracy | bal. acc. | precision | recall | kappa [95% CI] | run tau | AUC |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for subset, tags in SUBSETS:
        for matcher, extra in ROWS:
            r = run(folder, matcher, extra + tags)
            threshold = "LOCO-CV" if r["threshold"] == "cv" else f"{r['threshold']:g}"
            print(row(f"{matcher} @ {threshold}", subset, r))
    for path in extra_files:
        r = json.loads(Path(path).read_text(encoding="utf-8"))
        print(row(r["matcher"], Path(path).stem, r))


if __name__ == "__main__":
    main_table(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/ikat/2024-nuggets"), sys.argv[2:])

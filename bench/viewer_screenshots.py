"""Make the screenshots of docs/viewer.md with headless Chromium from real data.

    python bench/viewer_screenshots.py [--data ../shared/ikat] [--out docs/images]

The 2023 viewer: the test topics' manual and automatic runs made from the SPLADE reference run (as
tests/test_viewer.py makes them), NIST's qrels and PTKB qrels, the texts of the 894 passages; the 2025 viewer: the
two released interactive runs with the rubrics and the 2025 topics.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import provenance_jsonl
from viewer_common import browse, runs_2023

from ikatkit.viewer.build import build_viewer

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "ikat")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        year = args.data / "2023"
        runs = runs_2023(args.data, folder)
        offline = build_viewer([f"{n}={p}" for n, p in runs.items()], folder / "view-2023",
                               topics=str(year / "test_topics.json"), qrels=str(year / "qrels.txt"),
                               ptkb_qrels=str(year / "ptkb_qrels.nist.txt"),
                               passages=[str(provenance_jsonl(args.data / "2023", folder / "passages.jsonl"))]).parent
        released = args.data / "2025-released"
        interactive = build_viewer([str(p) for p in sorted((released / "interactive-runs").glob("*.jsonl"))],
                                   folder / "view-2025", rubrics=str(released / "rubrics.json"),
                                   topics=str(released / "2025_test_topics.json")).parent
        shots = {"viewer-overview.png": (offline / "index.html", 900),  # 11-2: turn 2 has texts and grades
                 "viewer-conversation.png": (offline / "c" / "11-2.html", 1900),
                 "viewer-interactive.png": (interactive / "c" / "1-2.html", 1100)}
        for name, (page, height) in shots.items():  # the top of each page (Chromium paints nothing at a #fragment)
            browse(page.as_uri(), f"--screenshot={args.out / name}", height=height)
            print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time the viewer of two 188-turn runs with 1000 cited passages a turn, and measure its files.

Build time and file sizes; in headless Chromium the time to parse and to paint the overview and the largest
conversation page, and to unfold a ranking's folded rows.

    python bench/bench_viewer.py [--data ../shared/ikat] [--references 1000] [--loads 3]

The runs are made from real data: the 188 turns of the 2025 test topics, each ranking the 894 real passages of the
2023 topics (texts shown from their JSONL) padded with made-up ids to 1000.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from common import provenance_jsonl
from viewer_common import big_run, browse

from ikatkit.viewer.build import build_viewer

PROBE = """<script>
(function(){
  var parsed = performance.now(), before = document.querySelectorAll("table.rank tbody tr").length;
  var t0 = performance.now(), more = document.querySelector("button.more");
  if (more) more.click();
  var rows = document.querySelectorAll("table.rank tbody tr").length - before;
  document.body.offsetHeight;  // layout of the drawn rows
  var pre = document.createElement("pre"); pre.id = "probe";
  pre.textContent = JSON.stringify({parsed: parsed, expand: performance.now() - t0, rows: rows});
  document.body.appendChild(pre);
})();
</script>"""


def timings(page: Path, loads: int) -> dict[str, float]:
    """Medians over ``loads`` fresh Chromium loads of ``page``: the time from navigation to the end of the page's
    parse (a probe at the end of its body, in a copy beside it) and to draw the folded rows of its first ranking
    ("show more"); and the wall time of
    a screenshot of the page less that of an empty page (what painting it adds)."""
    probe = page.with_name("bench-" + page.name)
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    empty = page.with_name("bench-empty.html")
    empty.write_text("<!doctype html><title>empty</title><p>empty</p>", encoding="utf-8")
    found = []
    try:
        for _ in range(loads):
            dom = browse(probe.as_uri(), "--dump-dom").stdout
            item = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1)))
            walls = []
            for target in (empty, page):
                shot = page.with_name("bench-shot.png")
                start = time.perf_counter()
                browse(target.as_uri(), f"--screenshot={shot}")
                walls.append(time.perf_counter() - start)
                shot.unlink()
            item["paint"] = 1000 * (walls[1] - walls[0])
            found.append(item)
    finally:
        probe.unlink()
        empty.unlink()
    return {key: statistics.median(f[key] for f in found) for key in ("parsed", "expand", "rows", "paint")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "ikat")
    parser.add_argument("--references", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        passages = provenance_jsonl(args.data / "2023", folder / "passages.jsonl")
        runs = [big_run(args.data, folder, name, seed, args.references) for seed, name in enumerate(("a", "b"))]
        run_bytes = sum(p.stat().st_size for p in runs)
        start = time.perf_counter()
        index = build_viewer([str(p) for p in runs], folder / "view", passages=[str(passages)],
                             topics=str(args.data / "2025-released" / "2025_test_topics.json"))
        built = time.perf_counter() - start
        pages = sorted((folder / "view" / "c").glob("*.html"), key=lambda p: -p.stat().st_size)
        total = sum(p.stat().st_size for p in pages) + index.stat().st_size
        print(f"runs: 2 x 188 turns x {args.references} passages ({run_bytes / 1e6:.1f} MB of JSONL); "
              f"viewer built in {built:.1f} s: {len(pages)} pages, {total / 1e6:.1f} MB in all, largest page "
              f"{pages[0].name} {pages[0].stat().st_size / 1e6:.2f} MB, index.html {index.stat().st_size / 1e3:.0f} kB")
        for page in (index, pages[0]):
            found = timings(page, args.loads)
            print(f"{page.relative_to(folder / 'view')}: parsed {found['parsed']:.0f} ms after navigation; a "
                  f"screenshot takes {found['paint']:.0f} ms longer than of an empty page"
                  + (f"; a ranking's folded rows ({found['rows']:.0f}) drawn in {found['expand']:.0f} ms"
                     if page != index else "") + f" (median of {args.loads} loads)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

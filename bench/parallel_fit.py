"""What ``bench/bench_parallel.py``'s quiet-machine JSONs say beyond the sizes measured (issue 53): per size the
one-thread milliseconds of a query and the speed-up on 2 threads; a power law of the one-thread time over the
collection's size, and Amdahl's serial fraction of each size (``s = 2 / speed-up - 1``: the share of a query's time
that two threads did not split) fitted the same way; both extrapolated to the organizers' 116,838,987 passages, and
the speed-up Amdahl's law gives there on 16 threads (``1 / (s + (1 - s) / 16)``). A fit of three or four sizes on one
machine: a forecast to check on a 16-core machine (``bench_parallel.py --threads 16``), not a measurement.

    python bench/parallel_fit.py ROOT/parallel-200k-quiet.json ROOT/parallel-2m-quiet.json ... \
        [--index as_built|merged] [--out fit.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import print_json  # noqa: E402

ORGANIZERS = 116_838_987


def points(paths: list[Path], index: str) -> dict[int, dict[str, float]]:
    """Per size, the mean over the runs given of the one-thread ms per query and the 2-thread speed-up."""
    runs: dict[int, list[dict[str, Any]]] = {}
    for path in paths:
        for size, found in json.loads(path.read_text(encoding="utf-8"))["sizes"].items():
            if index in found and found[index].get("same_rankings") == found[index]["queries"]:
                runs.setdefault(int(size), []).append(found[index])
    return {n: {"ms_1_thread": float(np.mean([r["1_thread_ms_per_query"] for r in rs])),
                "speedup_2": float(np.mean([r["speedup"] for r in rs])), "runs": len(rs)}
            for n, rs in sorted(runs.items())}


def power_law(sizes: list[int], values: list[float]) -> tuple[float, float]:
    """``(a, b)`` of ``value = a * size ** b``, least squares in log-log."""
    b, log_a = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(np.exp(log_a)), float(b)


def amdahl(serial: float, threads: int) -> float:
    return 1 / (serial + (1 - serial) / threads)


def fit(found: dict[int, dict[str, float]], threads: int = 16) -> dict[str, Any]:
    sizes = list(found)
    serial = {n: max(2 / p["speedup_2"] - 1, 1e-6) for n, p in found.items()}
    a, b = power_law(sizes, [p["ms_1_thread"] for p in found.values()])
    c, d = power_law(sizes, list(serial.values()))
    s_at = min(c * ORGANIZERS ** d, 1.0)
    ms_at = a * ORGANIZERS ** b
    return {"sizes": {n: {**p, "serial_fraction": round(serial[n], 3)} for n, p in found.items()},
            "ms_1_thread": {"a": a, "exponent": round(b, 3)}, "serial_fraction": {"c": c, "exponent": round(d, 3)},
            "at_organizers": {"passages": ORGANIZERS, "ms_1_thread": round(ms_at, 1),
                              "serial_fraction": round(s_at, 3), "speedup_2": round(amdahl(s_at, 2), 2),
                              f"speedup_{threads}": round(amdahl(s_at, threads), 2),
                              f"ms_{threads}_threads": round(ms_at / amdahl(s_at, threads), 1)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="bench_parallel.py JSONs")
    parser.add_argument("--index", choices=["as_built", "merged"], default="as_built")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    found = points(args.runs, args.index)
    if len(found) < 2:
        parser.error(f"{args.index}: fewer than two sizes with every ranking equal in {[str(p) for p in args.runs]}")
    print_json(fit(found, args.threads), args.out, indent=1)


if __name__ == "__main__":
    main()

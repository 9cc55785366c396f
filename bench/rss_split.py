"""A command's peak memory split into anonymous pages (what the process holds) and file-backed pages (memory-mapped
files such as Lucene's index, page cache the kernel reclaims), sampled from /proc/PID/status every 0.5 s, with a
line every 30 s to show whether each grows.

    python bench/rss_split.py [--seconds N] -- COMMAND ...
    python bench/rss_split.py -- ikatkit index verify /work/scale-indexes/r10000000/index \\
        --hashes /work/scale-indexes/r10000000/hashes.tsv

Prints one JSON: peak VmRSS, RssAnon and RssFile (MiB), the 30-s trace (seconds, anon, file) and the exit code
(``null`` when ``--seconds`` stopped the command first). Only the command's own process is sampled.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

FIELDS = ("VmRSS", "RssAnon", "RssFile")


def status(pid: int) -> dict[str, int]:
    """The process's VmRSS, RssAnon and RssFile in MiB (empty once it has gone)."""
    try:
        lines = open(f"/proc/{pid}/status", encoding="ascii").read().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in FIELDS:
            found[key] = int(value.split()[0]) // 1024
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, help="stop the command after this long (the peaks so far)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if not command:
        parser.error("give the command after --")
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    start, peak, trace, last = time.monotonic(), dict.fromkeys(FIELDS, 0), [], -30.0
    while child.poll() is None and (args.seconds is None or time.monotonic() - start < args.seconds):
        now = status(child.pid)
        peak = {key: max(peak[key], now.get(key, 0)) for key in FIELDS}
        if now and time.monotonic() - start - last >= 30:
            last = time.monotonic() - start
            trace.append((round(last), now.get("RssAnon"), now.get("RssFile")))
        time.sleep(0.5)
    if child.poll() is None:
        child.kill()
        child.wait()
        code = None
    else:
        code = child.returncode
    print(json.dumps({"peak_mib": peak, "trace_s_anon_file": trace, "exit": code}))


if __name__ == "__main__":
    main()

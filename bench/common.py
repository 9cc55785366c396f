"""Helpers shared by the benchmarks: synthetic ClueWeb22-style text, timing, peak memory of a process tree, the
report's JSON printed and written."""

from __future__ import annotations

import json
import math
import os
import random
import resource
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

WORDS = ("protein vegetarian runner knee marathon training diet tofu lentils beans japan train rail pass hiking "
         "family budget phone android camera battery pasta sauce tomato basil olive oil garlic recovery muscle "
         "strength exercise stretch season autumn spring blossom crowd temple food travel hotel ticket price").split()


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 20))
    end = rng.choices(".?!", weights=(90, 7, 3))[0]  # about as often as in real ClueWeb22 passages
    return words[0].capitalize() + " " + " ".join(words[1:]) + end


def write_clueweb22(folder: Path, documents: int, files: int = 4, seed: int = 0) -> list[Path]:
    """Raw ClueWeb22 records with 12-40 sentences each, spread over ``files`` .json files."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"en0000-{i:02d}.json" for i in range(files)]
    handles = [open(p, "w", encoding="utf-8") for p in paths]
    for i in range(documents):
        text = "\n".join(" ".join(sentence(rng) for _ in range(rng.randint(3, 8))) for _ in range(rng.randint(3, 6)))
        handles[i % files].write(json.dumps({"URL": f"https://example.org/{i}", "ClueWeb22-ID":
                                             f"clueweb22-en{i // 100000:04d}-{(i // 1000) % 100:02d}-{i % 100000:05d}",
                                             "Clean-Text": text}) + "\n")
    for handle in handles:
        handle.close()
    return paths


def provenance_texts(data: Path) -> dict[str, str]:
    """The 894 distinct real passages of the 2023 topics (``data``: the iKAT 2023 folder) by id
    (``doc_id:passage_id``), an id's first text kept, as tests/conftest.py's ``passages_jsonl`` keeps it."""
    texts: dict[str, str] = {}
    for name in ("train_provenance_passages.jsonl", "test_provenance_passages.jsonl"):
        for line in (data / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts.setdefault(f"{record['doc_id']}:{record['passage_id']}", record["passage_text"])
    return texts


def provenance_jsonl(data: Path, path: Path) -> Path:
    """:func:`provenance_texts` as passage JSONL (``{"id", "contents"}``) at ``path``."""
    texts = provenance_texts(data)
    path.write_text("".join(json.dumps({"id": k, "contents": v}) + "\n" for k, v in texts.items()), encoding="utf-8")
    return path


def print_json(report: Any, out: Path | None = None, indent: int = 2) -> None:
    """Print ``report`` as indented JSON, and write the same text (and a newline) to ``out`` where given."""
    text = json.dumps(report, indent=indent)
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")


def timed(function: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def interleaved(items: Sequence[Any], sides: dict[str, Callable[[Any], Any]], rounds: int,
                keep: Collection[str] = ()) -> tuple[dict[str, float], dict[str, list[Any]]]:
    """Each item run by every side in turn, ``rounds`` rounds, the order rotated from item to item and round to
    round so that no side always follows the same one: per side the sum over items of each item's fastest time (a
    busy machine's interruptions filtered out item by item), and the last round's results of the sides in
    ``keep``, kept alive through the round as a batch's are."""
    names = list(sides)
    fastest = {name: [math.inf] * len(items) for name in names}
    kept: dict[str, list[Any]] = {}
    for round_ in range(rounds):
        kept = {name: [] for name in keep}
        for i, item in enumerate(items):
            turn = (i + round_) % len(names)
            for name in names[turn:] + names[:turn]:
                start = time.perf_counter()
                found = sides[name](item)
                fastest[name][i] = min(fastest[name][i], time.perf_counter() - start)
                if name in kept:
                    kept[name].append(found)
                del found
    return {name: sum(times) for name, times in fastest.items()}, kept


class ProcessTree:
    """Peak resident memory (MiB) and CPU seconds of this process and its descendants, sampled from /proc.

    Each is split in parts: ``self`` (this process), ``java`` (the Java processes together) and ``children``
    (the other descendants together, e.g. the segmenters); ``peak_rss_mib["total"]`` is the peak of the sum.
    CPU seconds are counted from when the monitor starts, by the last sample of each process.
    """

    PARTS = ("self", "java", "children")

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_rss_mib = dict.fromkeys(("total", *self.PARTS), 0.0)
        self._cpu: dict[int, tuple[str, float]] = {}
        self._start_cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    @property
    def cpu_s(self) -> dict[str, float]:
        totals = dict.fromkeys(self.PARTS, 0.0)
        for pid, (part, seconds) in self._cpu.items():
            totals[part] += seconds - self._start_cpu.get(pid, 0.0)
        return totals

    def __enter__(self) -> ProcessTree:
        self._start_cpu = {pid: seconds for pid, (_, _, seconds) in _tree(os.getpid()).items()}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample_until_stopped(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def _sample(self) -> None:
        rss = dict.fromkeys(self.PARTS, 0.0)
        for pid, (part, mib, seconds) in _tree(os.getpid()).items():
            rss[part] += mib
            self._cpu[pid] = (part, seconds)
        rss["total"] = sum(rss.values())
        for part, value in rss.items():
            self.peak_rss_mib[part] = max(self.peak_rss_mib[part], value)


def _tree(root: int) -> dict[int, tuple[str, float, float]]:
    """``{pid: (part, rss MiB, CPU seconds)}`` for ``root`` and its descendants."""
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                text = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            stats[int(entry.name)] = (text[text.index("(") + 1: text.rindex(")")], fields)
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    found = {}
    for pid, (name, fields) in stats.items():
        ancestor = pid
        while ancestor != root and ancestor in stats:
            ancestor = int(stats[ancestor][1][1])
        if ancestor == root:
            part = "self" if pid == root else "java" if name == "java" else "children"
            found[pid] = (part, int(fields[21]) * page / 2**20, (int(fields[11]) + int(fields[12])) / tick)
    return found


def machine_busy_s() -> float:
    """CPU seconds every process on the machine has used since boot (all cores, from /proc/stat)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def say_llm_cpu(start: float, threads: int) -> None:
    """Wall seconds since ``start`` (``time.perf_counter``) and the CPU of this process and of its children (a
    llama.cpp server on ``threads`` threads), on stderr."""
    wall = time.perf_counter() - start
    own, server = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"wall {wall:.0f} s; CPU {own.ru_utime + own.ru_stime:.0f} s (this process), "
          f"{server.ru_utime + server.ru_stime:.0f} s (llama.cpp server, {threads} thread(s))", file=sys.stderr)


def drop_cache(folder: Path) -> None:
    """Ask the kernel to drop the page cache of every file in ``folder`` (posix_fadvise DONTNEED; no root needed)."""
    for path in folder.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

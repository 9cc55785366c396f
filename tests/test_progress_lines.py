"""What a progress line says (issue 69: "0 of 12 turn in 30 s, 0 turn/s" for minutes, an estimate that grew while
nothing changed, a first batch silent about what it did, a stop silent about what it kept): plural units, the rate
in the unit that reads, an estimate that never grows between updates, the stage at work, and a stopped real
``ikatkit run`` naming the turns it saved. A controllable clock makes every figure hand-computed."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys

from ikatkit.progress import Progress, rate_text, units

from bm25_config import BM25_EXTRACTIVE
from stops import ENV, stop_when


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_units_and_rates_read_as_numbers_do():
    assert [units(n, "turn") for n in (0, 1, 12)] == ["turns", "turn", "turns"]
    assert [units(n, "passages") for n in (1, 2)] == ["passage", "passages"]
    assert rate_text(0, 30, "turn") == ""  # nothing done: no rate (it said "0 turn/s")
    assert rate_text(1, 40, "turn") == "40 s/turn"
    assert rate_text(4, 10, "turn") == "2.5 s/turn"  # 0.4 turns/s, below one a second
    assert rate_text(10, 10, "turn") == "1.0 turns/s"
    assert rate_text(600, 4, "passages") == "150 passages/s"
    assert rate_text(10, 4, "passages") == "2.5 passages/s"


def test_a_log_line_names_the_work_and_the_estimate_only_falls_between_updates():
    """12 turns, a line every 10 s: nothing for 30 s (the stage at work named, no rate), 1 turn at 40 s (the
    warm-up: no estimate), 4 at 45 s: 8 left at 3 turns in 5 s, 13.3 s. Without updates it counts down (8.3 s at
    50 s, 0 from 58.3 s: "past the estimate"); 8 done at 61 s: 4 left at 7 turns in 21 s, 12 s. Later updates never
    raise it: a fresh estimate below what is left replaces it, one above does not (the slow 11th turn)."""
    clock, log = Clock(), io.StringIO()
    bar = Progress("turns", "turn", 12, stream=log, every=10, clock=clock)
    bar.now("rewrite on batch 1 of 3 (the first: models load on first use)")
    clock.now = 30.0
    bar._due()  # the ticking thread's call, at the clock's time
    clock.now = 40.0
    bar.update(1)
    assert bar.left() is None
    clock.now = 45.0
    bar.update(3)
    lefts = []
    for now in range(45, 61):
        clock.now = float(now)
        lefts.append(bar.left())
    assert [round(left, 2) for left in lefts[:6:5]] == [13.33, 8.33] and lefts == sorted(lefts, reverse=True)
    assert lefts[-1] == 0.0
    bar.now("retrieve on batch 2 of 3")
    bar._due()
    clock.now = 61.0
    bar.update(4)
    assert bar.left() == 12.0
    clock.now = 62.0
    bar.update(1)  # 9 done at 62 s: 3 left at 8 turns in 22 s would be 8.25 s, less than the 11 s left: 8.25 s
    assert bar.left() == 8.25
    clock.now = 63.0
    bar.update(1)  # 10 at 63 s: 2 left at 9 turns in 23 s, 5.1 s, under the 7.25 s left
    assert round(bar.left(), 2) == 5.11
    clock.now = 67.0
    bar.update(1)  # 11 at 67 s (a slow turn): 1 left at 10 turns in 27 s would be 2.7 s, more than the 1.11 s left
    assert round(bar.left(), 2) == 1.11
    clock.now = 70.0
    bar._due()
    bar.close()
    assert log.getvalue().splitlines() == [
        "turns: 0 of 12 turns in 30 s, now: rewrite on batch 1 of 3 (the first: models load on first use)",
        "turns: 1 of 12 turns in 40 s, 40 s/turn, now: rewrite on batch 1 of 3 (the first: models load on first use)",
        "turns: 4 of 12 turns in 60 s, 15 s/turn, past the estimate, now: retrieve on batch 2 of 3",
        "turns: 11 of 12 turns in 70 s, 6.4 s/turn, past the estimate, now: retrieve on batch 2 of 3",
        "turns: 11 of 12 turns in 70 s, 6.4 s/turn (done)"]


def test_a_run_stopped_by_sigint_names_the_turns_it_saved(ikat2023, passages_index, tmp_path):
    """A real ``ikatkit run`` (332 turns in batches of 2) under a real SIGINT: its progress lines name the stage and
    the batch at work, and the line before the resume line says how many turns the checkpoints hold."""
    config = tmp_path / "bm25.toml"
    config.write_text(BM25_EXTRACTIVE.replace("batch_size = 4", "batch_size = 2"), encoding="utf-8")
    out, log = tmp_path / "out", tmp_path / "stderr.txt"
    args = ["run", str(config), "--topics", str(ikat2023 / "test_topics.json"), "--index", str(passages_index),
            "--out", str(out)]
    process = subprocess.Popen([sys.executable, "-m", "ikatkit.cli", *args], start_new_session=True,
                               env={**ENV, "IKATKIT_PROGRESS_EVERY": "0.05"}, stdout=subprocess.DEVNULL,
                               stderr=log.open("w"))
    stop_when(process, lambda: len(list((out / "checkpoints").glob("batch-*.json"))) >= 3, signal.SIGINT, args, log)
    saved = 2 * len(list((out / "checkpoints").glob("batch-*.json")))
    lines = log.read_text().splitlines()
    assert lines[-2] == (f"run bm25-extractive: stopped; {saved} of 332 turns saved ({saved} now) in "
                         f"{out / 'checkpoints'}; the batch at work is dropped")
    at_work = [line for line in lines if line.startswith("turns: ")]
    assert at_work and all(re.fullmatch(r"turns: \d+ of 332 turns in [\d,]+ s(, [\d.,]+ (s/turn|turns/s))?"
                                        r"(, about \d+:\d\d left|, past the estimate)?, now: (manual_query|gold_ptkb"
                                        r"|retrieve|respond) on batch \d+ of 166( \(the first: models load on first "
                                        r"use\))?", line) for line in at_work), at_work

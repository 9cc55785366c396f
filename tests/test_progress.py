"""Progress in a log (not a terminal): a line every 30 s and one at the end, not one per update (issue 37/40:
``index build`` flooded logs with a tqdm line per update)."""

from __future__ import annotations

import io
import re

import pytest

from ikatkit.progress import Progress


def test_a_log_gets_one_line_per_interval_and_the_totals_at_the_end():
    log = io.StringIO()
    with Progress("passages", "passages", stream=log) as bar:
        for _ in range(1000):
            bar.update(7)
    assert re.fullmatch(r"passages: 7,000 passages in \d+ s(, [\d,]+ passages/s)? \(done\)\n", log.getvalue())
    log = io.StringIO()
    with Progress("files", "files", total=3, stream=log, every=0) as bar:  # every update past the interval
        for done in (1, 1, 2, 3):
            bar.moveto(done)
    lines = log.getvalue().splitlines()
    assert [line.split(" in ")[0] for line in lines] == ["files: 1 of 3 files", "files: 2 of 3 files",
                                                        "files: 3 of 3 files", "files: 3 of 3 files"]
    assert lines[-1].endswith("(done)")


def test_a_failed_job_prints_no_closing_line():
    log = io.StringIO()
    try:
        with Progress("passages", "passages", stream=log) as bar:
            bar.update(5)
            raise ValueError
    except ValueError:
        pass
    assert log.getvalue() == ""


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_estimate_from_the_first_batch_then_the_rate_after_it():
    """The first batch of 16 of 160 turns takes 40 s (models loading): no estimate then (it would say 360 s);
    16 more turns in 2 s: 128 left at 8 turns/s, 16 s."""
    clock, log = FakeClock(), io.StringIO()
    bar = Progress("turns", "turn", 160, stream=log, every=0, clock=clock)
    clock.now = 40.0
    bar.update(16)
    assert bar.left() is None
    assert log.getvalue() == "turns: 16 of 160 turns in 40 s, 2.5 s/turn\n"
    clock.now = 42.0
    bar.update(16)
    assert bar.left() == pytest.approx(16.0)
    assert log.getvalue().splitlines()[-1] == "turns: 32 of 160 turns in 42 s, 1.3 s/turn, about 0:16 left"
    resumed = Progress("turns", "turn", 160, stream=io.StringIO(), every=0, initial=64, clock=clock)
    clock.now = 50.0
    resumed.update(16)
    clock.now = 54.0
    resumed.update(16)
    assert resumed.left() == pytest.approx(64 * 4 / 16)


def test_a_terminal_bar_shows_the_estimate_only_after_the_first_batch():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock = FakeClock()
    first = Terminal()
    with Progress("turns", "turn", 160, stream=first, clock=clock) as bar:
        clock.now = 40.0
        bar.update(16)
    assert "16/160 [" in first.getvalue() and "left" not in first.getvalue()
    both = Terminal()
    with Progress("turns", "turn", 160, stream=both, clock=clock) as bar:
        clock.now = 80.0
        bar.update(16)
        clock.now = 82.0
        bar.update(16)
    assert both.getvalue().rstrip().endswith("32/160 [00:00, about 0:16 left]")


def test_a_log_gets_its_lines_when_updates_are_rare(monkeypatch):
    """One update in 0.6 s, lines every 0.1 s: the thread prints them without updates (issue 60: a shard encoded
    for minutes printed nothing); they stop at the closing line."""
    import time

    monkeypatch.setenv("IKATKIT_PROGRESS_EVERY", "0.1")
    log = io.StringIO()
    with Progress("encoded", "passages", total=10, stream=log) as bar:
        time.sleep(0.35)
        bar.update(4)
        time.sleep(0.35)
    lines = log.getvalue().splitlines()
    assert len(lines) >= 5 and lines[-1].startswith("encoded: 4 of 10 passages") and lines[-1].endswith("(done)")
    assert lines[0].startswith("encoded: 0 of 10 passages") and lines[-2].startswith("encoded: 4 of 10 passages")
    time.sleep(0.3)
    assert log.getvalue().splitlines() == lines


def test_a_bad_interval_is_one_clear_error(monkeypatch):
    from ikatkit.errors import IkatError

    monkeypatch.setenv("IKATKIT_PROGRESS_EVERY", "soon")
    with pytest.raises(IkatError, match="IKATKIT_PROGRESS_EVERY='soon' is not a number of seconds"):
        Progress("encoded", "passages", stream=io.StringIO())

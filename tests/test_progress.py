"""Progress in a log (not a terminal): a line every 30 s and one at the end, not one per update (issue 37/40:
``index build`` flooded logs with a tqdm line per update)."""

from __future__ import annotations

import io
import re

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

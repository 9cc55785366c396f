"""Progress of a long command for people: a bar on a terminal; in a log (not a terminal) a line every 30 s and
one at the end, never a line per update."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

LOG_EVERY_S = 30.0


class Progress:
    """Counts ``unit``s done of ``total`` (if known) under ``desc``; :meth:`update` adds, :meth:`moveto` sets."""

    def __init__(self, desc: str, unit: str, total: int | None = None, stream: TextIO | None = None,
                 every: float = LOG_EVERY_S) -> None:
        self.desc, self.unit, self.total, self.every = desc, unit, total, every
        self.stream = stream or sys.stderr
        self.done = 0
        self._started = self._shown = time.monotonic()
        self._bar = None
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit=unit, total=total, file=self.stream)

    def update(self, count: int) -> None:
        self.moveto(self.done + count)

    def moveto(self, done: int) -> None:
        if done == self.done:
            return
        if self._bar is not None:
            self._bar.update(done - self.done)
        self.done = done
        if self._bar is None and time.monotonic() - self._shown >= self.every:
            self._line()

    def _line(self, end: str = "") -> None:
        self._shown = time.monotonic()
        seconds = self._shown - self._started
        of = f" of {self.total:,}" if self.total is not None else ""
        rate = f", {self.done / seconds:,.0f} {self.unit}/s" if seconds > 0 else ""
        print(f"{self.desc}: {self.done:,}{of} {self.unit} in {seconds:,.0f} s{rate}{end}", file=self.stream,
              flush=True)

    def close(self) -> None:
        """End the bar; in a log, the closing line (the totals)."""
        if self._bar is not None:
            self._bar.close()
        else:
            self._line(" (done)")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if error is None:
            self.close()
        elif self._bar is not None:
            self._bar.close()

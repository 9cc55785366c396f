"""Progress of a long command for people: a bar on a terminal; in a log (not a terminal) a line every 30 s and
one at the end, never a line per update.

The time left is estimated from the updates after the first: the first one carries the warm-up (models loading,
caches filling), so an estimate from it alone says minutes for a job of seconds. Until a second update there is
no estimate."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

LOG_EVERY_S = 30.0
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"  # tqdm's, its own estimate left out


class Progress:
    """Counts ``unit``s done of ``total`` (if known) under ``desc``, from ``initial`` (done before, e.g. by an
    earlier run); :meth:`update` adds, :meth:`moveto` sets. ``position``: the bar's line among several."""

    def __init__(self, desc: str, unit: str, total: int | None = None, stream: TextIO | None = None,
                 every: float = LOG_EVERY_S, *, initial: int = 0, position: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.desc, self.unit, self.total, self.every = desc, unit, total, every
        self.stream = stream or sys.stderr
        self.done = self._initial = initial
        self._clock = clock
        self._started = self._shown = clock()
        self._first: tuple[float, int] | None = None  # (time, done) at the first update: the warm-up's end
        self._bar = None
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit=unit, total=total, initial=initial, position=position, leave=True,
                             file=self.stream, bar_format=BAR_FORMAT if total is not None else None)

    def update(self, count: int) -> None:
        self.moveto(self.done + count)

    def moveto(self, done: int) -> None:
        if done == self.done:
            return
        if self._first is None:
            self._first = (self._clock(), done)
        step, self.done = done - self.done, done
        if self._bar is not None:
            left = self.left()
            if left is not None:
                self._bar.set_postfix_str(f"{_clock_text(left)} left", refresh=False)
            self._bar.update(step)
        elif self._clock() - self._shown >= self.every:
            self._line()

    def left(self) -> float | None:
        """Seconds left at the rate since the first update; None before a second update or without a total."""
        if self.total is None or self._first is None:
            return None
        since, done = self._first
        if self.done <= done or self._clock() <= since:
            return None
        return (self.total - self.done) * (self._clock() - since) / (self.done - done)

    def _line(self, end: str = "") -> None:
        self._shown = self._clock()
        seconds = self._shown - self._started
        of = f" of {self.total:,}" if self.total is not None else ""
        rate = f", {(self.done - self._initial) / seconds:,.0f} {self.unit}/s" if seconds > 0 else ""
        left = self.left() if not end else None
        eta = f", about {_clock_text(left)} left" if left is not None else ""
        print(f"{self.desc}: {self.done:,}{of} {self.unit} in {seconds:,.0f} s{rate}{eta}{end}", file=self.stream,
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


def _clock_text(seconds: float) -> str:
    """``M:SS`` (``H:MM:SS`` from an hour)."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"

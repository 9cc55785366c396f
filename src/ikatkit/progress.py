"""Progress of a long command for people: a bar on a terminal; in a log (not a terminal) a line every 30 s
(``$IKATKIT_PROGRESS_EVERY`` seconds when set), whether updates come often or seldom (a thread prints the line
when none came), and one at the end; never a line per update.

A line says what is done, in plural units ("0 of 12 turns"), the rate in the unit that reads (``2.5 turns/s``, or
``7.5 s/turn`` below one a second; none before anything is done), the time left, and what is at work now when the
caller says (:meth:`Progress.now`: a pipeline names the stage and the batch, so a first batch that loads models for a
minute says where it is).

The time left is estimated at each update from the updates after the first: the first one carries the warm-up
(models loading, caches filling), so an estimate from it alone says minutes for a job of seconds. Until a second
update there is no estimate. Between updates the estimate counts down from the one made at the last update: it never
grows while nothing completes (the rate since the first update would, with every second of waiting), and an update
never raises it (the fresh estimate, or what is left of the last one if less): it only falls. Once it has run out
with work left, the line says "past the estimate" until the next update makes a new one."""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from ikatkit.errors import IkatError

LOG_EVERY_S = 30.0
EVERY_VARIABLE = "IKATKIT_PROGRESS_EVERY"  # seconds between a log's lines, e.g. 1 in tests and short jobs
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"  # tqdm's, its own estimate left out


class Progress:
    """Counts ``unit``s done of ``total`` (if known) under ``desc``, from ``initial`` (done before, e.g. by an
    earlier run); :meth:`update` adds, :meth:`moveto` sets. ``position``: the bar's line among several. ``every``:
    seconds between a log's lines (default :func:`log_every`; 0: a line at every update and no thread)."""

    def __init__(self, desc: str, unit: str, total: int | None = None, stream: TextIO | None = None,
                 every: float | None = None, *, initial: int = 0, position: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.desc, self.unit, self.total = desc, unit, total
        self.every = log_every() if every is None else every
        self.stream = stream or sys.stderr
        self.done = self._initial = initial
        self._clock = clock
        self._started = self._shown = clock()
        self._first: tuple[float, int] | None = None  # (time, done) at the first update: the warm-up's end
        self._estimate: tuple[float, float] | None = None  # (time, seconds left) made at the last update
        self.doing: str | None = None  # what is at work now (:meth:`now`)
        self._bar = None
        self._lock = threading.Lock()  # the log's line: printed by an update or by the ticking thread
        self._stop = threading.Event()
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit=unit, total=total, initial=initial, position=position, leave=True,
                             file=self.stream, bar_format=BAR_FORMAT if total is not None else None)
        elif self.every > 0:  # the thread holds the bar weakly: a bar dropped unclosed (an error) stops it
            threading.Thread(target=_tick, args=(weakref.ref(self), self._stop), name=f"progress {desc}",
                             daemon=True).start()

    def update(self, count: int) -> None:
        self.moveto(self.done + count)

    def moveto(self, done: int) -> None:
        if done == self.done:
            return
        now = self._clock()
        if self._first is None:
            self._first = (now, done)
        step, self.done = done - self.done, done
        since, first = self._first
        if self.total is not None and done > first and now > since:
            fresh = (self.total - done) * (now - since) / (done - first)
            live = self.left()  # an estimate still counting down is never raised: it only falls until it runs out
            self._estimate = (now, fresh if not live else min(fresh, live))
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix(), refresh=False)
            self._bar.update(step)
        else:
            with self._lock:
                if self._clock() - self._shown >= self.every:
                    self._line()

    def _due(self) -> float:
        """Seconds until a log's next line is due, the line printed first when it is due now (the thread's)."""
        with self._lock:
            if self._stop.is_set():
                return self.every
            if self._clock() - self._shown >= self.every:
                self._line()
            return self.every - (self._clock() - self._shown)

    def expect(self, total: int) -> None:
        """The total, once it is known (a job that counts its work after its bar opened)."""
        self.total = total
        if self._bar is not None:
            self._bar.total, self._bar.bar_format = total, BAR_FORMAT
            self._bar.refresh()

    def now(self, doing: str | None) -> None:
        """Say what is at work now (a stage, a batch): on a log's next line and the bar's postfix; None: nothing."""
        self.doing = doing
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix())

    def left(self) -> float | None:
        """Seconds left: the estimate made at the last update (the rate since the first update), less the time since
        it; never below 0. None before a second update or without a total."""
        if self._estimate is None:
            return None
        made, seconds = self._estimate
        return max(0.0, seconds - (self._clock() - made))

    def _eta(self) -> str:
        left = self.left()
        if left is None or self.done == self.total:
            return ""
        return f"about {_clock_text(left)} left" if left > 0 else "past the estimate"

    def _postfix(self) -> str:
        return ", ".join(part for part in (self._eta(), self.doing and f"now: {self.doing}") if part)

    def _line(self, end: str = "") -> None:
        self._shown = self._clock()
        seconds = self._shown - self._started
        of = f" of {self.total:,}" if self.total is not None else ""
        count = self.total if self.total is not None else self.done
        rate = rate_text(self.done - self._initial, seconds, self.unit)
        parts = [f"{self.desc}: {self.done:,}{of} {units(count, self.unit)} in {seconds:,.0f} s", rate,
                 *([] if end else [self._postfix()])]
        print(", ".join(part for part in parts if part) + end, file=self.stream, flush=True)

    def close(self) -> None:
        """End the bar; in a log, the closing line (the totals)."""
        self._stop.set()
        if self._bar is not None:
            self._bar.close()
        else:
            with self._lock:
                self._line(" (done)")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if error is None:
            self.close()
        else:
            self._stop.set()
            with self._lock:  # a line the thread is printing ends before the error's
                if self._bar is not None:
                    self._bar.close()


def log_every() -> float:
    """Seconds between a log's lines: ``$IKATKIT_PROGRESS_EVERY`` when set, else 30."""
    value = os.environ.get(EVERY_VARIABLE, "").strip()
    if not value:
        return LOG_EVERY_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # NaN and negatives too
        raise IkatError(f"{EVERY_VARIABLE}={value!r} is not a number of seconds", where="environment",
                        fix=f"set {EVERY_VARIABLE} to seconds >= 0 (e.g. 5), or unset it for 30")
    return seconds


def _tick(bar: weakref.ref[Progress], stop: threading.Event) -> None:
    """A log's line whenever ``every`` seconds pass without one, until the bar closes or is dropped."""
    wait = 0.0
    while not stop.wait(max(wait, 0.01)):
        found = bar()
        if found is None:
            return
        try:
            wait = found._due()
        except (OSError, ValueError):  # the stream closed under an unclosed bar
            return
        del found


def units(count: float, unit: str) -> str:
    """``unit`` (singular or plural as given) in the number that fits ``count``: turn, 1 turn, 12 turns."""
    one = unit[:-1] if unit.endswith("s") else unit
    return one if count == 1 else f"{one}s"


def rate_text(done: int, seconds: float, unit: str) -> str:
    """``done`` units in ``seconds`` as the rate that reads: units a second from one a second (``2.5 turns/s``), else
    seconds a unit (``7.5 s/turn``); two significant places below 10, whole numbers above. Empty when none is
    done (a rate of 0 says nothing)."""
    if done <= 0 or seconds <= 0:
        return ""
    per_second = done / seconds
    if per_second >= 1:
        return f"{_figure(per_second)} {units(2, unit)}/s"
    return f"{_figure(seconds / done)} s/{units(1, unit)}"


def _figure(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def _clock_text(seconds: float) -> str:
    """``M:SS`` (``H:MM:SS`` from an hour)."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"

"""A collection-encoding job watched by a real :class:`ikatkit.progress.Progress` (its lines written to a string):
each batch's passages and each step named are kept, and the job can be stopped after a batch, as Ctrl-C stops it."""

from __future__ import annotations

import io

from ikatkit.progress import Progress


class Watched(Progress):
    """``counts``: each batch's passages; ``steps``: what was said to be at work; ``stop_after``: raise
    KeyboardInterrupt once that many batches came back (None: never)."""

    def __init__(self, stop_after: int | None = None) -> None:
        super().__init__("encoded", "passages", stream=io.StringIO(), every=0)
        self.counts: list[int] = []
        self.steps: list[str | None] = []
        self.stop_after = stop_after

    def update(self, count: int) -> None:
        self.counts.append(count)
        super().update(count)
        if self.stop_after is not None and len(self.counts) >= self.stop_after:
            raise KeyboardInterrupt

    def now(self, doing: str | None) -> None:
        self.steps.append(doing)
        super().now(doing)

    @property
    def lines(self) -> list[str]:
        assert isinstance(self.stream, io.StringIO)
        return self.stream.getvalue().splitlines()

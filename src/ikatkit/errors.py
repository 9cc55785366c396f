"""One error type for bad input: it names the file, the place and the fix."""

from __future__ import annotations

from pathlib import Path


class IkatError(Exception):
    """A user-facing error: what is wrong, where (file, line or field), and how to fix it."""

    def __init__(self, message: str, *, path: str | Path | None = None,
                 where: str | None = None, fix: str | None = None) -> None:
        self.message, self.path, self.where, self.fix = message, path, where, fix
        super().__init__(str(self))

    def __str__(self) -> str:
        place = ""
        if self.path is not None:
            place = f"{self.path}" + (f" ({self.where})" if self.where else "") + ": "
        elif self.where:
            place = f"{self.where}: "
        return place + self.message + (f" — fix: {self.fix}" if self.fix else "")

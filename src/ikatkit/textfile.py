"""The one opener of the text files ikatkit reads (runs, qrels, topics, rubrics, nuggets, passages, labels).

A file is UTF-8, plain or compressed: gzip or bzip2, told by its first bytes whatever its name (``qrels.txt.gz``, a
gzipped run without the suffix). A leading byte-order mark is dropped and line ends read as ``\\n``, as Python's
text mode reads them. Bytes that are not UTF-8, and a compressed file cut short, are one :class:`IkatError` naming
the file, the line and the byte offset (in the decompressed text), and the fix.
"""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from ikatkit.errors import IkatError

GZIP, BZIP2 = b"\x1f\x8b", b"BZh"
BOM = "\ufeff"
NOT_UTF8_FIX = "save it as UTF-8 (a Latin-1 file: `iconv -f latin1 -t utf-8 FILE > FILE.utf8`)"
CUT_FIX = "the file is cut short: copy or download it again in full"


def compression(path: str | Path) -> str | None:
    """``gzip`` or ``bzip2`` when the file starts with that format's magic bytes, else None."""
    with open(path, "rb") as handle:
        head = handle.read(3)
    return "gzip" if head[:2] == GZIP else "bzip2" if head == BZIP2 else None


def open_binary(path: str | Path) -> io.BufferedIOBase:
    """The file's bytes, decompressed on the fly when it is gzip or bzip2."""
    kind = compression(path)
    if kind == "gzip":
        return gzip.open(path, "rb")
    return bz2.open(path, "rb") if kind == "bzip2" else open(path, "rb")


def _not_utf8(path: Path, data: bytes, err: UnicodeDecodeError, line: int, offset: int) -> IkatError:
    """The error for ``err`` in ``data`` (line ``line`` of ``path``, starting at byte ``offset`` of the text)."""
    byte, line = data[err.start], line + data.count(b"\n", 0, err.start)
    return IkatError(f"not UTF-8: byte 0x{byte:02x} at byte offset {offset + err.start}", path=path,
                     where=f"line {line}", fix=NOT_UTF8_FIX)


def _decode(path: Path, data: bytes, line: int, offset: int) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _not_utf8(path, data, err, line, offset) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _cut(path: Path, err: Exception) -> IkatError:
    return IkatError(f"{type(err).__name__}: {err}", path=path, fix=CUT_FIX)


def read_text(path: str | Path) -> str:
    """The whole text of ``path`` (plain, gzip or bzip2), UTF-8 checked."""
    path = Path(path)
    try:
        with open_binary(path) as handle:
            data = handle.read()
    except (EOFError, gzip.BadGzipFile) as err:
        raise _cut(path, err) from None
    return _decode(path, data, 1, 0).removeprefix(BOM)


def _lines(path: Path, handle: io.BufferedIOBase) -> Iterator[str]:
    offset = 0
    try:
        for number, raw in enumerate(handle, start=1):
            line = _decode(path, raw, number, offset)
            yield line.removeprefix(BOM) if offset == 0 else line
            offset += len(raw)
    except (EOFError, gzip.BadGzipFile) as err:
        raise _cut(path, err) from None


@contextmanager
def open_text(path: str | Path) -> Iterator[Iterator[str]]:
    """The lines of ``path`` (plain, gzip or bzip2), each ending in ``\\n`` but perhaps the last, streamed and
    UTF-8 checked line by line: ``with open_text(path) as lines: for line in lines: ...``."""
    path = Path(path)
    with open_binary(path) as handle:
        yield _lines(path, handle)

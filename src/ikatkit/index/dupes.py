"""Duplicate passage ids in memory flat in the collection's size.

Each segmenter appends ``(hash, file, line)`` records, the hash being 64 bits of the passage id's SHA-256, to
one of ``BUCKETS`` files chosen by the hash's top byte. The check then loads one bucket at a time (1/256 of
the collection), sorts its hashes and looks for equal neighbours. Only the files holding a repeated hash
are read again, to name the id and both of its places; a 64-bit collision between different ids is no error.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.collection.segment import splitter as make_splitter
from ikatkit.errors import IkatError

BUCKETS = 256
RECORD = np.dtype([("hash", "<u8"), ("file", "<u4"), ("line", "<u4")])
MAX_REPEATED = 1000  # repeated hashes looked at; beyond that there are surely duplicates among them


def id_hash(pid: str) -> bytes:
    """The first 8 bytes of a passage id's SHA-256 (read as a little-endian integer in the buckets), as the
    Java segmenter (``IkatClueWeb22Collection.java``) writes them too."""
    return hashlib.sha256(pid.encode("utf-8", "surrogatepass")).digest()[:8]


class IdHashes:
    """One segmenter's records, kept in memory ``chunk`` at a time and appended to the bucket files."""

    def __init__(self, folder: Path, worker: int, chunk: int = 1 << 16) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._paths = [folder / f"{bucket:03d}-{worker:03d}.bin" for bucket in range(BUCKETS)]
        self._chunk = chunk
        self._digests, self._files, self._lines = bytearray(), array("I"), array("I")

    def add(self, pid: str, file: int, line: int) -> None:
        self._digests += id_hash(pid)
        self._files.append(file)
        self._lines.append(line)
        if len(self._files) >= self._chunk:
            self.flush()

    def flush(self) -> None:
        records = np.empty(len(self._files), RECORD)
        records["hash"] = np.frombuffer(self._digests, "<u8")
        records["file"], records["line"] = self._files, self._lines
        top = (records["hash"] >> np.uint64(56)).astype(np.uint8)
        order = np.argsort(top, kind="stable")
        records, bounds = records[order], np.searchsorted(top[order], np.arange(BUCKETS + 1))
        for bucket in np.flatnonzero(np.diff(bounds)):
            with open(self._paths[bucket], "ab") as handle:
                records[bounds[bucket]: bounds[bucket + 1]].tofile(handle)
        self._digests, self._files, self._lines = bytearray(), array("I"), array("I")

    def __enter__(self) -> IdHashes:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None and self._files:
            self.flush()


def check_unique(folder: Path, files: Sequence[Path], fmt: str, splitter: str) -> None:
    """Fail, naming both places, if a passage id occurs twice in the records under ``folder``."""
    buckets: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("*.bin")):
        buckets.setdefault(path.name.split("-")[0], []).append(path)
    repeated: dict[int, list[tuple[int, int]]] = {}
    for paths in buckets.values():
        records = np.concatenate([np.fromfile(path, RECORD) for path in paths])
        hashes = np.sort(records["hash"])
        same = hashes[1:][hashes[1:] == hashes[:-1]]
        if same.size:
            for value, file, line in records[np.isin(records["hash"], same)].tolist():
                repeated.setdefault(value, []).append((file, line))
        if len(repeated) >= MAX_REPEATED:
            break
    if repeated:
        _name_duplicate(repeated, files, fmt, splitter)


def _name_duplicate(repeated: dict[int, list[tuple[int, int]]], files: Sequence[Path], fmt: str,
                    splitter: str) -> None:
    """Read the files holding repeated hashes in order; raise for the first id that is really repeated."""
    places = {place for found in repeated.values() for place in found}
    last_line: dict[int, int] = {}
    for file, line in places:
        last_line[file] = max(line, last_line.get(file, 0))
    complete_after = {value: max(file for file, _ in found) for value, found in repeated.items()}
    seen: dict[int, list[tuple[str, int, int]]] = {value: [] for value in repeated}
    split = make_splitter(splitter)
    for file in sorted(last_line):
        for passage in read_passages(files[file], fmt, ReadStats(), split):
            if passage.line > last_line[file]:
                break
            if (file, passage.line) in places:
                value = int.from_bytes(id_hash(passage.id), "little")
                if value in seen:
                    seen[value].append((passage.id, file, passage.line))
        for value in (v for v, last in complete_after.items() if last == file):
            first: dict[str, tuple[int, int]] = {}
            for pid, file2, line2 in seen[value]:
                if pid in first:
                    file1, line1 = first[pid]
                    more = f"; {len(repeated)}{'+' if len(repeated) >= MAX_REPEATED else ''} ids repeat" \
                        if len(repeated) > 1 else ""
                    raise IkatError(f"duplicate passage id {pid!r}, first at {files[file1]}:{line1}{more}",
                                    path=files[file2], where=f"line {line2}",
                                    fix="passage ids must be unique across the collection; remove the copy")
                first[pid] = (file2, line2)

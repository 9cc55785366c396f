"""Which passage ids exist in the collection: an id file, the organizers' hash file, or a Lucene index.

Each source answers ``missing(ids) -> set`` for the ids of one run, so a 116-million-line hash file
is streamed once, keeping nothing but the run's ids, instead of being loaded into memory.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Protocol

from tqdm import tqdm

from ikatkit.errors import IkatError


class PassageIds(Protocol):
    def missing(self, ids: set[str]) -> set[str]: ...


class IdFile:
    """One passage id per line, or the organizers' ``doc_id<TAB>passage_no<TAB>md5`` hash file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise IkatError("passage id file not found", path=self.path,
                            fix="pass a file with one passage id per line, or the organizers' hash file")

    def missing(self, ids: set[str]) -> set[str]:
        left = set(ids)
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(tqdm(handle, desc="passage ids", unit=" lines", disable=None), start=1):
                cols = line.rstrip("\n").split("\t")
                if len(cols) == 3:
                    pid = f"{cols[0]}:{cols[1]}"
                elif len(cols) == 1 and len(cols[0].split()) == 1:
                    pid = cols[0].strip()
                elif len(cols) == 1 and not cols[0].strip():
                    continue
                else:
                    raise IkatError(f"expected one passage id or 3 tab-separated columns, found {line.strip()[:60]!r}",
                                    path=self.path, where=f"line {number}",
                                    fix="one passage id per line, or doc_id<TAB>passage_no<TAB>md5")
                left.discard(pid)
                if not left:
                    break
        return left


class LuceneIds:
    """The passages stored in a Lucene index (ids as indexed, ``doc_id:passage_no``)."""

    def __init__(self, index: str | Path) -> None:
        from ikatkit.java import import_pyserini

        self.index = Path(index)
        if not (self.index / "segments").exists() and not any(self.index.glob("segments_*")):
            raise IkatError("not a Lucene index", path=self.index, fix="pass a folder built by `ikatkit index build`")
        self._searcher = import_pyserini().LuceneSearcher(str(self.index))

    def missing(self, ids: set[str]) -> set[str]:
        return {pid for pid in tqdm(sorted(ids), desc="passage ids", unit=" ids", disable=None)
                if self._searcher.doc(pid) is None}


class IdSet:
    """Ids already in memory."""

    def __init__(self, ids: Collection[str]) -> None:
        self.ids = ids

    def missing(self, ids: set[str]) -> set[str]:
        return {pid for pid in ids if pid not in self.ids}


def passage_ids(source: str | Path | Collection[str] | PassageIds) -> PassageIds:
    """A :class:`PassageIds` of a Lucene index folder, an id/hash file, a collection of ids, or itself."""
    if hasattr(source, "missing"):
        return source  # type: ignore[return-value]
    if isinstance(source, (str, Path)):
        return LuceneIds(source) if Path(source).is_dir() else IdFile(source)
    return IdSet(source)

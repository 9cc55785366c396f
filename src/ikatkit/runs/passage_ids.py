"""Which passage ids exist in the collection: an id file, the organizers' hash file (plain or .bz2), or a Lucene
index.

Each source answers ``missing(ids) -> set`` for the ids of one run, so a 116-million-line hash file
is streamed once, keeping nothing but the run's ids, instead of being loaded into memory.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

from tqdm import tqdm

from ikatkit.errors import IkatError
from ikatkit.index.hashes import is_hash_file, open_text, read_hashes


@runtime_checkable
class PassageIds(Protocol):
    def missing(self, ids: set[str]) -> set[str]: ...


class IdFile:
    """One passage id per line, or the organizers' ``doc_id<TAB>passage_no<TAB>md5`` hash file (read by
    :func:`ikatkit.index.hashes.read_hashes`); either plain, ``.bz2`` or ``.gz``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise IkatError("passage id file not found", path=self.path,
                            fix="pass a file with one passage id per line, or the organizers' hash file")

    def missing(self, ids: set[str]) -> set[str]:
        left = set(ids)
        for pid in tqdm(self._ids(), desc="passage ids", unit=" lines", disable=None):
            left.discard(pid)
            if not left:
                break
        return left

    def _ids(self) -> Iterator[str]:
        if is_hash_file(self.path):
            yield from (f"{doc}:{number}" for (doc, number), _ in read_hashes(self.path, strict=False))
            return
        with open_text(self.path) as handle:
            for number, line in enumerate(handle, start=1):
                words = line.split()
                if len(words) > 1:
                    raise IkatError(f"expected one passage id or 3 tab-separated columns, found {line.strip()[:60]!r}",
                                    path=self.path, where=f"line {number}",
                                    fix="one passage id per line, or doc_id<TAB>passage_no<TAB>md5")
                if words:
                    yield words[0]


class LuceneIds:
    """The passages stored in a Lucene index (ids as indexed, ``doc_id:passage_no``), opened as every index is
    (:func:`ikatkit.index.lucene.lucene_info`) and looked up by their ``id`` terms."""

    def __init__(self, index: str | Path) -> None:
        from ikatkit.index.lucene import IdLookup, lucene_info, open_reader

        self.index = lucene_info(index).path
        self._reader = open_reader(self.index)
        self._lookup = IdLookup(self._reader)

    def missing(self, ids: set[str]) -> set[str]:
        return {pid for pid in tqdm(sorted(ids), desc="passage ids", unit=" ids", disable=None)
                if self._lookup.doc(pid) is None}


class IdSet:
    """Ids already in memory."""

    def __init__(self, ids: Collection[str]) -> None:
        self.ids = ids

    def missing(self, ids: set[str]) -> set[str]:
        return {pid for pid in ids if pid not in self.ids}


def passage_ids(source: str | Path | Collection[str] | PassageIds) -> PassageIds:
    """A :class:`PassageIds` of a Lucene index folder, an id/hash file, a collection of ids, or itself."""
    if isinstance(source, PassageIds):  # runtime_checkable: has a ``missing`` method
        return source
    if isinstance(source, (str, Path)):
        return LuceneIds(source) if Path(source).is_dir() else IdFile(source)
    return IdSet(source)

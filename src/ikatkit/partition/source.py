"""The passages a partitioning reads: a built index's stored passages, or collection files read as ``index build``
reads them; streamed, in a stable order, so that a second pass meets them in the order of the first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from ikatkit.collection.readers import ReadStats, input_files, read_passages
from ikatkit.collection.segment import splitter as splitter_function
from ikatkit.digest import json_digest
from ikatkit.errors import IkatError
from ikatkit.index.lucene import index_identity, is_lucene_folder
from ikatkit.index.texts import index_records


class Source:
    """Passages of ``path``: a Lucene index folder (own or foreign, storing its texts) or collection files/folders."""

    def __init__(self, path: str | Path, fmt: str = "auto", splitter: str = "auto") -> None:
        self.path = Path(path)
        self.is_index = is_lucene_folder(self.path)
        self.fmt, self.splitter = fmt, splitter
        self.files = [] if self.is_index else input_files([self.path])

    def fingerprint(self) -> str:
        """Changes when the passages may change: the index's manifest or Lucene commit, or the files' sizes and
        times."""
        if self.is_index:
            return json_digest(index_identity(self.path))
        files = [(str(file.resolve()), file.stat().st_size, file.stat().st_mtime_ns) for file in self.files]
        return json_digest([files, self.fmt, self.splitter])

    def records(self) -> Iterator[dict[str, str]]:
        """``{"id", "contents", ...}`` per passage: an index's stored JSON, a collection's id, contents and url."""
        if self.is_index:
            yield from index_records(self.path, "partitioning its passages")
            return
        split = splitter_function(self.splitter)
        for file in self.files:
            stats = ReadStats()
            for passage in read_passages(file, self.fmt, stats, split):
                yield {"id": passage.id, "contents": passage.contents, "url": passage.url}


class Categories:
    """A passage's category: the value of ``field``, a URL's host, or the first group of ``pattern`` in it."""

    def __init__(self, field: str, pattern: str | None = None) -> None:
        self.field = field
        try:
            self.pattern = re.compile(pattern) if pattern else None
        except re.error as err:
            raise IkatError(f"invalid --pattern {pattern!r}: {err}", fix="give a Python regular expression") from None
        if self.pattern is not None and self.pattern.groups < 1:
            raise IkatError(f"--pattern {pattern!r} has no group", fix="mark the category with (...), e.g. '^([^-]+)'")

    def __call__(self, record: dict[str, str], where: str) -> str:
        value = record.get(self.field)
        if not isinstance(value, str) or not value:
            raise IkatError(f"passage {record.get('id')!r} has no field {self.field!r}", where=where,
                            fix=f"choose a --field the records have (this one has {sorted(record)})")
        if self.pattern is not None:
            found = self.pattern.search(value)
            if not found or found.group(1) is None:
                raise IkatError(f"--pattern does not match {self.field} {value!r} of passage {record.get('id')!r}",
                                where=where, fix="use a pattern that matches every passage")
            return found.group(1)
        host = urlsplit(value).hostname if value.startswith(("http://", "https://")) else None
        return host or value

"""Query files: ``qid<TAB>text`` lines, as organizers and teams distribute rewrites.

``ikatkit search --queries FILE`` searches them; ``ikatkit run --queries FILE`` (or a ``file_query`` stage)
uses them as the turns' queries. A run pins each query file's SHA-256 into its config, so the run's
fingerprint changes when the file does. A file is read and hashed once (:func:`query_file`) however many readers
ask for it while it stays as it is.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.textfile import read_text
from ikatkit.pipelines.config import RunConfig, with_stages

QUERY_STAGES = ("raw_query", "manual_query", "rewrite")


@dataclass(frozen=True)
class QueryFile:
    """A query file as read: its queries and the SHA-256 of its bytes."""

    queries: dict[str, str]
    sha256: str


def query_file(path: str | Path) -> QueryFile:
    """The query file at ``path``, read and hashed once while its size and modification time stay the same."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("query file not found", path=path, fix="pass a file of 'qid<TAB>text' lines")
    stat = path.stat()
    return _query_file(path.resolve(), stat.st_size, stat.st_mtime_ns)


def read_queries(path: str | Path) -> dict[str, str]:
    """``{qid: text}`` from a TSV file; blank lines are skipped, a malformed or repeated line is an error."""
    return dict(query_file(path).queries)


@lru_cache(maxsize=16)
def _query_file(path: Path, size: int, mtime_ns: int) -> QueryFile:
    data = path.read_bytes()
    queries: dict[str, str] = {}
    with io.StringIO(read_text(path)) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            qid, tab, text = line.rstrip("\r\n").partition("\t")
            if not tab or not qid.strip() or not text.strip():
                raise IkatError(f"expected 'qid<TAB>text', got {line.strip()[:200]!r}", path=path,
                                where=f"line {number}", fix="one query per line: the turn id, a tab, the text")
            if qid in queries and queries[qid] != text.strip():
                raise IkatError(f"query {qid} appears twice with different texts", path=path,
                                where=f"line {number}", fix="keep one line per turn")
            queries[qid] = text.strip()
    if not queries:
        raise IkatError("query file is empty", path=path, fix="pass a file of 'qid<TAB>text' lines")
    return QueryFile(queries, hashlib.sha256(data).hexdigest())


def queries_for(kind: str, topics: str | Path | None) -> dict[str, str]:
    """Query id -> text: the ``raw`` or ``manual`` (resolved) utterances of a topic file, or a query file's."""
    if kind in ("raw", "manual"):
        from ikatkit.topics import load_topics

        if not topics:
            raise IkatError(f"--queries {kind} reads the utterances of a topic file", where="--queries",
                            fix="pass --topics FILE, or --queries with a file of 'qid<TAB>text' lines")
        return load_topics(topics).queries(kind)
    return read_queries(kind)


def use_query_file(config: RunConfig, path: str | Path) -> RunConfig:
    """``config`` with its queries read from ``path``: the path goes into its ``file_query`` stage, or a
    ``file_query`` stage replaces its query stage (``raw_query``, ``manual_query`` or ``rewrite``)."""
    names = config.names()
    places = [i for i, n in enumerate(names) if n == "file_query"] or [i for i, n in enumerate(names)
                                                                         if n in QUERY_STAGES]
    if len(places) != 1:
        raise IkatError(f"--queries needs one query stage to replace; this config has {len(places)}",
                        path=config.path, fix=f"give the config one file_query stage or one of {QUERY_STAGES}")
    tables: list[Mapping[str, Any]] = list(config.stages)
    tables[places[0]] = {"stage": "file_query", "path": str(path)}
    return with_stages(config, tables)


def pin_query_files(config: RunConfig, qids: list[str]) -> RunConfig:
    """``config`` with the SHA-256 of every ``file_query`` stage's file added (``sha256``), so that a changed
    file changes the run's fingerprint (the stage checks it again when it runs); every turn of ``qids`` must
    have a query in the file."""
    if "file_query" not in config.names():
        return config
    tables: list[Mapping[str, Any]] = []
    for spec in config.stages:
        if spec.name == "file_query":
            if "path" not in spec.options:
                raise IkatError("a file_query stage needs path = \"queries.tsv\"", path=config.path,
                                fix="add path, or pass --queries FILE to ikatkit run")
            path = spec.options["path"]
            found = query_file(path)
            missing = [qid for qid in qids if qid not in found.queries]
            if missing:
                raise IkatError(f"no query for {len(missing)} of the {len(qids)} turns, e.g. {missing[:3]}",
                                path=path, fix="add a 'qid<TAB>text' line for every turn, or pass "
                                               "--conversations to run fewer")
            tables.append({**spec, "sha256": found.sha256})
        else:
            tables.append(spec)
    return with_stages(config, tables)

"""The one reader of the organizers' passage hash file (``2023_passages_hashes.tsv``, plain, ``.bz2`` or ``.gz``).

A line ``doc_id<TAB>passage_number<TAB>md5`` per official passage: the md5 (hex) of the passage text as UTF-8 (the
``contents`` of the official JSONL, unchanged), sorted by document id and then passage number. It is streamed
(116,838,987 lines), never loaded: ``index verify`` merges it with an index in that order, ``validate --index``
takes its ids only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.textfile import open_text

MD5 = re.compile(r"^[0-9a-f]{32}$")
Key = tuple[str, int]


def passage_md5(text: str) -> str:
    """What the hash file holds for a passage: the md5 of its text as UTF-8, in hex."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def is_hash_file(path: str | Path) -> bool:
    """Whether the first non-empty line of ``path`` has the hash file's three tab-separated columns."""
    try:
        with open_text(Path(path)) as handle:
            line = next((line for line in handle if line.strip()), "")
    except (IkatError, OSError):  # not UTF-8, a cut archive: not a hash file
        return False
    return line.rstrip("\r\n").count("\t") == 2


def read_hashes(path: str | Path, strict: bool = True) -> Iterator[tuple[Key, str]]:
    """``((doc_id, passage_number), md5)`` per line of a hash file, checked as read: three columns and a numeric
    passage number always; with ``strict`` (what a merge needs) also 32 hex digits and the file's sort order."""
    path = Path(path)
    if not path.is_file():
        raise IkatError("hash file not found", path=path, fix="pass the organizers' 2023_passages_hashes.tsv(.bz2)")
    previous: Key | None = None
    with open_text(path) as handle:
        try:
            for number, line in enumerate(handle, 1):
                cols = line.rstrip("\r\n").split("\t")
                if len(cols) == 1 and not cols[0].strip():
                    continue
                if len(cols) != 3 or not cols[0] or not cols[1].isdigit() or (
                        strict and not MD5.match(cols[2].lower())):
                    raise IkatError(f"expected doc_id<TAB>passage_number<TAB>md5, found {line.strip()[:80]!r}",
                                    path=path, where=f"line {number}",
                                    fix="pass the organizers' hash file (doc_id, passage number, 32 hex digits)")
                key = (cols[0], int(cols[1]))
                if strict and previous is not None and key <= previous:
                    raise IkatError(f"not sorted by doc id and passage number ({key[0]}:{key[1]} after "
                                    f"{previous[0]}:{previous[1]})", path=path, where=f"line {number}",
                                    fix="sort it: LC_ALL=C sort -t $'\\t' -k1,1 -k2,2n")
                previous = key
                yield key, cols[2].lower()
        except OSError as err:
            raise IkatError(f"cannot read the hash file ({err})", path=path,
                            fix="download it again (a complete .tsv or .tsv.bz2)") from None

"""Embeddings kept on disk by text: one SQLite file per model identity, one row per text.

Each ``put`` is one transaction, so a killed writer leaves the rows of the batches it finished and nothing
half-written; concurrent processes may share the file (SQLite locks it; the first write of a text wins, and
later writes of the same text are ignored, so a vector never changes once stored). Beside the vectors, the
bi-encoder keeps which batch shapes (rows, tokens) give each text the bits it gets alone.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np


class EmbeddingCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS shapes (rows INTEGER, tokens INTEGER, exact INTEGER NOT NULL, "
                         "PRIMARY KEY (rows, tokens))")
        self._shapes: dict[tuple[int, int], bool] = {}

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    def get(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those ``texts`` that have one (looked up 500 at a time)."""
        keys = {self._key(text): text for text in texts}
        found = {}
        ordered = list(keys)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start:start + 500]
            rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
                                    chunk)
            for key, blob in rows:
                found[keys[key]] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        rows = [(self._key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes()) for t, v in vectors.items()]
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?)", rows)

    def shape_verdict(self, shape: tuple[int, int]) -> bool | None:
        """Whether a batch of ``shape`` (rows, tokens) gives each text its own bits; None when not yet checked."""
        if shape not in self._shapes:
            row = self._db.execute("SELECT exact FROM shapes WHERE rows = ? AND tokens = ?", shape).fetchone()
            if row is None:
                return None
            self._shapes[shape] = bool(row[0])
        return self._shapes[shape]

    def keep_shape_verdict(self, shape: tuple[int, int], exact: bool) -> None:
        self._shapes[shape] = exact
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO shapes VALUES (?, ?, ?)", (*shape, int(exact)))

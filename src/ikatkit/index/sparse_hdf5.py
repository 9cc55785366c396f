"""The organizers' SPLADE index as it comes: naver/splade's ``IndexDictOfArray`` layout, read in place.

A folder holding (what ``shubham526/ikat-2024``'s ``splade_indexer.py`` writes through naver/splade's
``IndexDictOfArray.save``, the 2024-2025 ``splade_index.tar.bz2``):

- ``array_index.h5py``: HDF5, per vocabulary term ``t`` with postings the datasets ``index_doc_id_{t}`` (int32 rows,
  ascending) and ``index_doc_value_{t}`` (float32 weights), and a scalar ``dim`` (their save writes the number of
  non-empty posting lists, not the vocabulary size: the terms are the datasets' names);
- ``doc_ids.pkl``: a pickled Python list, row -> passage id;
- ``index_dist.json``: ``{term: posting-list length}``.

Nothing is loaded whole and nothing is copied: h5py's ``create_dataset(data=...)`` writes contiguous, uncompressed
datasets, so each posting list is a zero-copy view of one ``numpy.memmap`` of the file, its place read from the
file's own metadata (:mod:`ikatkit.index.hdf5_layout`, all 61,045 datasets in one pass; h5py a dataset at a time
where that reader does not know the file); a chunked, compressed or other-dtype list is read through h5py, once.
``doc_ids.pkl`` is not unpickled (116.8M Python strings would take minutes and tens of GB): its opcodes are scanned
by a numba kernel into one offset per row, in parallel over the pickle's frames (protocol 4+), and only the rows a
search returns become strings. Opening checks the files' shapes and that the rows the postings name (the largest
row + 1) are the ids ``doc_ids.pkl`` holds; :meth:`HDF5SparseIndex.verify` checks everything else.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.index.hdf5_layout import FLOAT, INT, Datasets, read_datasets
from ikatkit.index.manifest import SPARSE_HDF5

ARRAY, IDS, DIST = "array_index.h5py", "doc_ids.pkl", "index_dist.json"
ROWS, VALUES = "index_doc_id_", "index_doc_value_"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
PASSAGE_LENGTH = 512  # tokens the organizers' indexer cut passages to (splade_indexer.py, max_length=512)
EXAMPLES = 5  # ids or terms shown per problem
FIX_ARCHIVE = "extract the folder again from the organizers' splade_index.tar.bz2 (trecikat.com's data page)"


class WeightEncoder(Protocol):
    """What verification and search ask of a SPLADE model: float32 weights, one row of vocabulary size a text
    (:class:`ikatkit.index.sparse_encoder.SparseEncoder` is one)."""

    def weights(self, texts: list[str], max_length: int = ...) -> np.ndarray: ...


def _kernels() -> Any:
    """The numba kernels, compiled at run time for this CPU (cached beside the module): imported on first use."""
    from ikatkit.index import sparse_hdf5_kernels

    return sparse_hdf5_kernels


def is_hdf5_index(folder: str | Path) -> bool:
    """Whether ``folder`` is in the organizers' layout (``array_index.h5py`` an HDF5 file, beside ``doc_ids.pkl``);
    reads 8 bytes."""
    path = Path(folder) / ARRAY
    if not path.is_file() or not (Path(folder) / IDS).exists():
        return False
    with path.open("rb") as handle:
        return handle.read(8) == HDF5_SIGNATURE


class PassageIds:
    """``doc_ids.pkl`` without unpickling it: one offset per row into the mapped file, strings made on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        size = path.stat().st_size
        self._bytes = np.asarray(np.memmap(path, dtype=np.uint8, mode="r")) if size else np.zeros(0, np.uint8)
        kernels = _kernels()
        frames, error = kernels.frames(self._bytes)
        if error >= 0:
            raise self._bad(int(error), "cut short" if error >= size else "not a pickled list of passage ids")
        counts, errors, lists = kernels.count_strings(self._bytes, frames)
        bad = errors[errors >= 0]
        if len(bad) or lists.sum() != 1 or self._bytes[frames[0, 0]] != kernels.EMPTY_LIST:
            raise self._bad(int(bad.min()) if len(bad) else int(frames[0, 0]), "not a pickled list of strings")
        if self._bytes[frames[-1, 1] - 1] != kernels.STOP:
            raise self._bad(size, "cut short (no STOP opcode at its end)")
        self.offsets = kernels.string_offsets(self._bytes, frames, np.cumsum(counts) - counts, int(counts.sum()))

    def _bad(self, position: int, what: str) -> IkatError:
        return IkatError(f"{what} (byte {position} of {self.path.stat().st_size})", path=self.path,
                         fix=f"doc_ids.pkl is the pickled list row -> passage id written with the index: {FIX_ARCHIVE}")

    def __len__(self) -> int:
        return len(self.offsets)

    def ids(self, rows: Iterable[int]) -> list[str]:
        """The passage ids of ``rows`` (ints in ``[0, len(self))``): their bytes gathered into one buffer, joined by
        newlines, decoded and split once (each id decoded alone where one holds a newline)."""
        wanted = self.offsets[np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64)]
        if not len(wanted):
            return []
        joined = _kernels().joined_strings(self._bytes, wanted).tobytes().decode("utf-8")
        found = joined.split("\n")
        if len(found) == len(wanted):
            return found
        places = _kernels().strings_at(self._bytes, wanted)
        return [bytes(self._bytes[start:start + length]).decode("utf-8") for start, length in places.tolist()]

    def problems(self) -> list[str]:
        """Ids not unique, or not ClueWeb22 passage ids (``clueweb22-enXXXX-XX-XXXXX:N``): one line each kind."""
        found = []
        hashes = _kernels().id_hashes(self._bytes, self.offsets)
        order = np.argsort(hashes, kind="stable")
        same = np.flatnonzero(hashes[order][1:] == hashes[order][:-1])
        duplicates = sorted({pid for i in same for pid, other in [self.ids([order[i], order[i + 1]])] if pid == other})
        if duplicates:
            found.append(f"{len(duplicates)} passage ids occur more than once, e.g. {', '.join(duplicates[:EXAMPLES])}")
        bad = np.flatnonzero(~_kernels().clueweb22_form(self._bytes, self.offsets))
        if len(bad):
            found.append(f"{len(bad)} ids are not ClueWeb22 passage ids (clueweb22-enXXXX-XX-XXXXX:N), e.g. "
                         + ", ".join(map(repr, self.ids(bad[:EXAMPLES]))))
        return found


@dataclass
class VerifyReport:
    """What :meth:`HDF5SparseIndex.verify` found: the counts, the re-encoding comparison, and one line a problem."""

    stats: dict[str, Any]
    encoding: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        lines = [f"{key}: {value}" for key, value in self.stats.items()]
        if self.encoding:
            lines += [f"re-encoded {key}: {value}" for key, value in self.encoding.items()]
        lines += [f"problem: {line}" for line in self.problems]
        lines.append("the index is consistent" if self.ok else f"{len(self.problems)} problems")
        return "\n".join(lines)


class HDF5SparseIndex:
    """An open index in the organizers' layout: posting lists by term id, ``count`` rows, ids by row."""

    def __init__(self, folder: str | Path) -> None:
        import h5py

        self.folder = Path(folder)
        self.path = self.folder / ARRAY
        if not self.folder.is_dir():
            raise IkatError("no such folder", path=self.folder, fix="pass the folder extracted from "
                            "splade_index.tar.bz2 (array_index.h5py, doc_ids.pkl, index_dist.json)")
        if not self.path.is_file():
            raise IkatError(f"not the organizers' SPLADE index: no {ARRAY}", path=self.folder,
                            fix=f"pass the folder holding {ARRAY}, {IDS} and {DIST}")
        if not (self.folder / IDS).is_file():
            raise IkatError(f"no {IDS} beside {ARRAY}: without it rows cannot be named", path=self.folder / IDS,
                            fix=f"copy {IDS} from the same index (it is in splade_index.tar.bz2), or {FIX_ARCHIVE}")
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as err:
            what = "cut short" if "truncated" in str(err) else "not a readable HDF5 file"
            raise IkatError(f"{what} ({self.path.stat().st_size} bytes; HDF5: {str(err)[:160]})", path=self.path,
                            fix=FIX_ARCHIVE) from None
        self.dim = int(self._file["dim"][()]) if "dim" in self._file else None
        size = self.path.stat().st_size
        mapped = np.asarray(np.memmap(self.path, dtype=np.uint8, mode="r")) if size else np.zeros(0, np.uint8)
        self.words = mapped[:size // 4 * 4].view(np.int32)
        self.floats = self.words.view(np.float32)
        datasets = read_datasets(mapped)
        self._read: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # lists h5py read into memory
        # per term: where its rows and weights start in ``words`` (-1: not a view of the file), its postings
        self.terms, self._places, self._lengths = (self._from_layout(datasets) if datasets is not None
                                                   else self._from_h5py())
        self.vocabulary = int(self.terms[-1]) + 1 if len(self.terms) else 0
        self.passage_ids = PassageIds(self.folder / IDS)
        self.count = len(self.passage_ids)
        named = self._rows_named()
        if named != self.count:
            raise IkatError(f"holds {self.count} passage ids but the postings of {ARRAY} name {named} rows",
                            path=self.folder / IDS, fix=f"{IDS} and {ARRAY} must come from the same index: "
                            + FIX_ARCHIVE)

    def _from_layout(self, datasets: Datasets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The lists' places from the file's own metadata (:mod:`ikatkit.index.hdf5_layout`: 60 ms for the 61,045
        datasets where h5py takes 1.3 s); a list not stored as a plain little-endian array is read through h5py."""
        found: dict[str, dict[int, int]] = {ROWS: {}, VALUES: {}}
        for i, name in enumerate(datasets.names):
            for prefix, where in found.items():
                if name.startswith(prefix):
                    where[int(name[len(prefix):])] = i
        missing = sorted(set(found[ROWS]) ^ set(found[VALUES]))
        if missing:
            term = missing[0]
            have, lack = (ROWS, VALUES) if term in found[ROWS] else (VALUES, ROWS)
            raise IkatError(f"no dataset {lack}{term} beside {have}{term}", path=self.path, fix=FIX_ARCHIVE)
        terms = np.array(sorted(found[ROWS]), dtype=np.int64)
        rows = np.array([found[ROWS][t] for t in terms.tolist()], dtype=np.int64)
        values = np.array([found[VALUES][t] for t in terms.tolist()], dtype=np.int64)
        places, lengths = self._empty_tables(terms)
        aligned = (datasets.address % 4 == 0) | (datasets.size == 0)  # an empty dataset has no address
        plain = (datasets.kind[rows] == INT) & (datasets.kind[values] == FLOAT) & aligned[rows] & aligned[values]
        wrong = plain & (datasets.size[rows] != datasets.size[values])
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            raise IkatError(f"{VALUES}{terms[i]} has {datasets.size[values[i]] // 4} weights for "
                            f"{datasets.size[rows[i]] // 4} rows", path=self.path, fix=FIX_ARCHIVE)
        places[terms[plain], 0] = np.maximum(datasets.address[rows[plain]], 0) // 4
        places[terms[plain], 1] = np.maximum(datasets.address[values[plain]], 0) // 4
        lengths[terms[plain]] = datasets.size[rows[plain]] // 4
        for term in terms[~plain].tolist():
            lengths[term] = len(self._read_list(term)[0])
        return terms, places, lengths

    def _from_h5py(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The lists' places through h5py (a file the metadata reader does not know), a dataset at a time."""
        terms = np.array(sorted(int(name[len(ROWS):]) for name in self._file if name.startswith(ROWS)), np.int64)
        places, lengths = self._empty_tables(terms)
        for term in terms.tolist():
            (rows, row_start), (values, value_start) = self._list(ROWS, term, np.int32), self._list(VALUES, term,
                                                                                                   np.float32)
            if len(values) != len(rows):
                raise IkatError(f"{VALUES}{term} has {len(values)} weights for {len(rows)} rows", path=self.path,
                                fix=FIX_ARCHIVE)
            lengths[term] = len(rows)
            if row_start >= 0 and value_start >= 0:
                places[term] = row_start, value_start
            else:
                self._read[term] = rows, values
        return terms, places, lengths

    @staticmethod
    def _empty_tables(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        size = int(terms[-1]) + 1 if len(terms) else 0
        return np.full((size, 2), -1, dtype=np.int64), np.zeros(size, dtype=np.int64)

    def _rows_named(self) -> int:
        """The largest row any list names, plus one (each list's last row: rows ascend)."""
        named = 0
        mapped = (self._places[:, 0] >= 0) & (self._lengths > 0)
        if mapped.any():
            named = int(self.words[self._places[mapped, 0] + self._lengths[mapped] - 1].max()) + 1
        for rows, _ in self._read.values():
            if len(rows):
                named = max(named, int(rows[-1]) + 1)
        return named

    def _read_list(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """A list h5py reads (chunked, compressed, another dtype), once."""
        if term not in self._read:
            (rows, _), (values, _) = self._list(ROWS, term, np.int32), self._list(VALUES, term, np.float32)
            if len(values) != len(rows):
                raise IkatError(f"{VALUES}{term} has {len(values)} weights for {len(rows)} rows", path=self.path,
                                fix=FIX_ARCHIVE)
            self._read[term] = rows, values
        return self._read[term]

    def _list(self, prefix: str, term: int, dtype: type) -> tuple[np.ndarray, int]:
        """A dataset as a 1-D array and its start in :attr:`words`: a view of the mapped file when contiguous,
        uncompressed, of ``dtype`` and aligned; else read through h5py (converted as their loader does; start -1)."""
        import h5py

        name = f"{prefix}{term}"
        try:
            dataset = self._file[name]
        except KeyError:
            raise IkatError(f"no dataset {name} beside {ROWS}{term}", path=self.path, fix=FIX_ARCHIVE) from None
        offset = dataset.id.get_offset()
        plain = (offset is not None and offset % 4 == 0 and dataset.dtype == np.dtype(dtype).newbyteorder("<")
                 and dataset.ndim == 1 and dataset.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS)
        if plain:
            start = offset // 4
            if start + dataset.shape[0] > len(self.words):
                raise IkatError(f"dataset {name} lies past the file's end", path=self.path, fix=FIX_ARCHIVE)
            return (self.words if dtype is np.int32 else self.floats)[start:start + dataset.shape[0]], start
        try:
            return np.asarray(dataset[()], dtype=dtype).reshape(-1), -1
        except OSError as err:
            raise IkatError(f"dataset {name} cannot be read ({str(err)[:120]})", path=self.path,
                            fix=FIX_ARCHIVE) from None

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, weights)`` of ``term`` (int32 ascending, float32), empty when it has no list."""
        if term < 0 or term >= self.vocabulary:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        rows, values = self._places[term]
        if rows >= 0:
            n = self._lengths[term]
            return self.words[rows:rows + n], self.floats[values:values + n]
        if self._lengths[term] == 0 and term not in self._read:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        return self._read_list(term)

    def place(self, term: int) -> tuple[int, int] | None:
        """Where the rows and weights of ``term`` start in :attr:`words` / :attr:`floats`, or None where they were
        read into memory (or ``term`` has no list)."""
        rows, values = self._places[term] if 0 <= term < self.vocabulary else (-1, -1)
        return (int(rows), int(values)) if rows >= 0 else None

    def ids(self, rows: Iterable[int]) -> list[str]:
        """The passage ids of ``rows``."""
        return self.passage_ids.ids(rows)

    def distribution(self) -> dict[int, int] | None:
        """``index_dist.json`` (term -> list length) when present."""
        path = self.folder / DIST
        if not path.is_file():
            return None
        try:
            return {int(term): int(n) for term, n in json.loads(path.read_text(encoding="utf-8")).items()}
        except (ValueError, AttributeError) as err:
            raise IkatError(f"not a JSON object term -> length ({err})", path=path, fix=FIX_ARCHIVE) from None

    def stats(self) -> dict[str, Any]:
        """Counts: rows (named by the postings), ids (in doc_ids.pkl), terms with a list, postings, dim."""
        postings = int(self._lengths.sum())
        mapped = int(((self._places[:, 0] >= 0) & (self._lengths > 0)).sum())
        return {"kind": SPARSE_HDF5, "folder": str(self.folder), "rows": self.count, "ids": len(self.passage_ids),
                "terms": len(self.terms), "largest_term": self.vocabulary - 1, "dim": self.dim, "postings": postings,
                "postings_per_row": round(postings / max(1, self.count), 2), "lists_mapped_in_place": mapped,
                "bytes": {name: (self.folder / name).stat().st_size for name in (ARRAY, IDS, DIST)
                          if (self.folder / name).is_file()}}

    def vectors(self, rows: Sequence[int]) -> list[dict[int, float]]:
        """The stored weights ``{term: weight}`` of ``rows`` (one binary search a list: for samples)."""
        wanted = np.sort(np.asarray(rows, dtype=np.int32))
        found: dict[int, dict[int, float]] = {int(row): {} for row in wanted}
        for term in self.terms.tolist():
            rows_t, values = self.postings(term)
            at = np.searchsorted(rows_t, wanted)
            hit = at < len(rows_t)
            hit[hit] = rows_t[at[hit]] == wanted[hit]
            for row, j in zip(wanted[hit].tolist(), at[hit].tolist()):
                found[row][term] = float(values[j])
        return [found[int(row)] for row in rows]

    def verify(self, encoder: WeightEncoder | None = None, texts: Callable[[Sequence[str]], dict[str, str]] | None
               = None, sample: int = 32, max_length: int = PASSAGE_LENGTH, seed: int = 0) -> VerifyReport:
        """Counts, ``index_dist.json`` against the lists, ids unique and of ClueWeb22's form, every list's rows
        strictly ascending and within range with positive finite weights, and, given ``encoder`` and ``texts``
        (``ids -> {id: text}``), ``sample`` passages re-encoded at ``max_length`` tokens and compared with their
        stored weights: a mean Jaccard of the kept terms under 0.9 or an L1 difference over 10% of the stored
        weights is a problem (a wrong model, length or dtype; half precision on a GPU stays well within)."""
        report = VerifyReport(self.stats())
        report.problems += self.passage_ids.problems()
        if self.dim is not None and self.dim not in (len(self.terms), self.vocabulary):
            report.problems.append(f"dim is {self.dim}, neither the {len(self.terms)} lists nor the vocabulary")
        dist = self.distribution()
        if dist is not None:
            lengths = dict(zip(self.terms.tolist(), self._lengths[self.terms].tolist()))
            wrong = sorted(t for t in set(dist) | set(lengths) if dist.get(t, 0) != lengths.get(t, 0))
            if wrong:
                report.problems.append(f"{DIST} disagrees with {ARRAY} on {len(wrong)} terms, e.g. "
                                       + ", ".join(f"{t}: {dist.get(t, 0)} vs {lengths.get(t, 0)}"
                                                   for t in wrong[:EXAMPLES]))
        bad: dict[str, list[int]] = {"rows not strictly ascending": [], "rows out of range": [],
                                     "weights not positive and finite": []}
        for term in self.terms.tolist():
            order, outside, weights = _kernels().check_list(*self.postings(term), self.count)
            for kind, failed in zip(bad, (order, outside, weights)):
                if failed:
                    bad[kind].append(term)
        report.problems += [f"{kind} in {len(terms)} lists, e.g. terms {terms[:EXAMPLES]}"
                            for kind, terms in bad.items() if terms]
        if encoder is not None:
            if texts is None:
                raise IkatError("re-encoding a sample needs the passages' texts", path=self.folder,
                                fix="pass texts (ids -> {id: text}): the collection's BM25 index or passage files")
            report.encoding = self._compare(encoder, texts, sample, max_length, seed, report.problems)
        return report

    def _compare(self, encoder: WeightEncoder, texts: Callable[[Sequence[str]], dict[str, str]], sample: int,
                 max_length: int, seed: int, problems: list[str]) -> dict[str, Any]:
        rows = np.sort(np.random.default_rng(seed).choice(self.count, min(sample, self.count), replace=False))
        ids = self.ids(rows)
        found = texts(ids)
        kept = [(row, pid) for row, pid in zip(rows.tolist(), ids) if pid in found]
        if len(kept) < len(ids):
            problems.append(f"{len(ids) - len(kept)} of {len(ids)} sampled passages have no text, e.g. "
                            + ", ".join(pid for pid in ids if pid not in found)[:200])
        if not kept:
            return {"passages": 0}
        stored = self.vectors([row for row, _ in kept])
        encoded = [encoder.weights([found[pid]], max_length)[0] for _, pid in kept]
        jaccard, l1, total, equal = [], 0.0, 0.0, 0
        for vector, weights in zip(stored, encoded):
            terms = set(np.flatnonzero(weights > 0).tolist())
            if len(weights) < self.vocabulary:
                raise IkatError(f"the model's vocabulary has {len(weights)} terms, the index's lists go to term "
                                f"{self.vocabulary - 1}", path=self.path, fix="verify with the index's model")
            jaccard.append(len(terms & set(vector)) / max(1, len(terms | set(vector))))
            l1 += sum(abs(vector.get(t, 0.0) - float(weights[t])) for t in terms | set(vector))
            total += sum(vector.values())
            equal += all(np.float32(vector.get(t, 0.0)) == weights[t] for t in terms | set(vector))
        result = {"passages": len(kept), "max_length": max_length, "terms_jaccard_mean": round(float(np.mean(jaccard)),
                  4), "weight_l1_relative": round(l1 / max(total, 1e-30), 4), "equal_vectors": equal}
        if result["terms_jaccard_mean"] < 0.9 or result["weight_l1_relative"] > 0.1:
            problems.append(f"{len(kept)} sampled passages re-encoded at {max_length} tokens differ from their stored "
                            f"weights (terms Jaccard {result['terms_jaccard_mean']}, L1 "
                            f"{result['weight_l1_relative']:.1%}): another model, passage length or dtype")
        return result

    def close(self) -> None:
        self._file.close()


def open_hdf5_index(folder: str | Path) -> HDF5SparseIndex:
    """Open the organizers' SPLADE index in ``folder``: one clear :class:`IkatError` for a folder that is not one."""
    return HDF5SparseIndex(folder)


def write_hdf5_index(folder: str | Path, ids: Sequence[str], rows: np.ndarray, terms: np.ndarray,
                     weights: np.ndarray) -> Path:
    """Write an index in the organizers' layout (tests, benches): postings ``(rows[i], terms[i], weights[i])``,
    rows ascending within each term as their indexer adds them; the datasets, names, dtypes, ``dim`` (the number of
    lists), ``index_dist.json`` and pickle of ``IndexDictOfArray.save`` and ``splade_indexer.py``."""
    import h5py

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    order = np.lexsort((rows, terms))
    rows, terms, weights = rows[order].astype(np.int32), terms[order], weights[order].astype(np.float32)
    cuts = np.flatnonzero(np.diff(terms)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(terms)]
    present = terms[starts].tolist() if len(terms) else []
    with h5py.File(out / ARRAY, "w") as handle:
        handle.create_dataset("dim", data=len(present))
        for term, start, end in zip(present, starts.tolist(), ends.tolist()):
            handle.create_dataset(f"{ROWS}{term}", data=rows[start:end])
            handle.create_dataset(f"{VALUES}{term}", data=weights[start:end])
    (out / DIST).write_text(json.dumps({int(t): int(e - s) for t, s, e in zip(present, starts, ends)}))
    with (out / IDS).open("wb") as handle:
        pickle.dump(list(ids), handle)
    return out

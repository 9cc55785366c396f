"""The HDF5 metadata reader (``ikatkit.index.hdf5_layout``) against h5py, dataset by dataset: where it knows a file it
says what h5py says (layout, dtype, address, size), over B-trees of several levels and object headers continued
elsewhere; a file it does not know is left to h5py, and the organizers' index opens and searches the same either way."""

from __future__ import annotations

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
pytest.importorskip("numba")


def _h5py_view(path) -> dict[str, tuple[int, int, int]]:
    """What h5py says of every dataset of the root group: (kind, address, size) as the reader reports them."""
    from ikatkit.index.hdf5_layout import FLOAT, INT

    found = {}
    with h5py.File(path, "r") as handle:
        for name in handle:
            dataset = handle[name]
            contiguous = dataset.id.get_create_plist().get_layout() == h5py.h5d.CONTIGUOUS
            kind = {np.dtype("<i4"): INT, np.dtype("<f4"): FLOAT}.get(dataset.dtype, -1) if contiguous else -1
            offset = dataset.id.get_offset()
            found[name] = (kind, -1 if offset is None else offset, dataset.id.get_storage_size() if contiguous else 0)
    return found


def _reader_view(path) -> dict[str, tuple[int, int, int]] | None:
    from ikatkit.index.hdf5_layout import read_datasets

    found = read_datasets(np.fromfile(path, dtype=np.uint8))
    if found is None:
        return None
    return {name: (kind, address, size) for name, kind, address, size in
            zip(found.names, found.kind.tolist(), found.address.tolist(), found.size.tolist())}


def _index(folder, terms: int = 3000, rows: int = 4000, seed: int = 0):
    from ikatkit.index.sparse_hdf5 import write_hdf5_index

    rng = np.random.default_rng(seed)
    row = rng.integers(0, rows, 40_000)
    term = rng.integers(0, terms, 40_000)
    pairs = np.unique(np.stack([row, term], axis=1), axis=0)
    ids = [f"clueweb22-en0000-00-{i // 10:05d}:{i % 10}" for i in range(rows)]
    return write_hdf5_index(folder, ids, pairs[:, 0], pairs[:, 1], rng.random(len(pairs)).astype(np.float32) + 0.1)


def test_every_dataset_where_h5py_says_over_a_b_tree_of_several_levels(tmp_path):
    """6,001 datasets (a symbol node holds 8, an inner node 32 children: three levels), some empty."""
    folder = _index(tmp_path / "index")
    with h5py.File(folder / "array_index.h5py", "a") as handle:
        handle.create_dataset("index_doc_id_5000", data=np.zeros(0, np.int32))
        handle.create_dataset("index_doc_value_5000", data=np.zeros(0, np.float32))
    expected = _h5py_view(folder / "array_index.h5py")
    assert len(expected) == 6003
    assert _reader_view(folder / "array_index.h5py") == expected
    assert expected["index_doc_id_5000"] == (0, -1, 0) and expected["dim"][0] == -1  # empty; the int64 scalar


def test_headers_continued_elsewhere_and_other_dtypes_and_layouts(tmp_path):
    """Attributes added after writing move a header's messages into continuation blocks; int64, big-endian and
    chunked datasets are named as h5py's to read."""
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w") as handle:
        for i in range(40):
            handle.create_dataset(f"a{i}", data=np.arange(i + 1, dtype=np.int32))
        handle.create_dataset("wide", data=np.arange(5, dtype=np.int64))
        handle.create_dataset("big", data=np.arange(5, dtype=">f4"))
        handle.create_dataset("packed", data=np.arange(500, dtype=np.float32), chunks=(100,), compression="gzip")
        handle.create_dataset("floats", data=np.ones(7, np.float32))
    with h5py.File(path, "a") as handle:
        for i in range(0, 40, 3):
            for j in range(12):
                handle[f"a{i}"].attrs[f"note{j}"] = "x" * 40
    found = _reader_view(path)
    assert found == _h5py_view(path)
    assert found["wide"][0] == found["big"][0] == found["packed"][0] == -1 and found["floats"][0] == 1


def test_a_file_it_does_not_know_is_left_to_h5py_and_searches_the_same(tmp_path):
    """libver="latest" writes a version-3 superblock and new-style groups: the reader says None, the index opens
    through h5py and returns the same hits as the same lists in the default layout."""
    import shutil

    from ikatkit.index.hdf5_layout import read_datasets
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    plain = _index(tmp_path / "plain", terms=300)
    latest = tmp_path / "latest"
    latest.mkdir()
    for name in ("doc_ids.pkl", "index_dist.json"):
        shutil.copy(plain / name, latest / name)
    with h5py.File(plain / "array_index.h5py", "r") as source, \
            h5py.File(latest / "array_index.h5py", "w", libver="latest") as out:
        for name in source:
            out.create_dataset(name, data=source[name][()])
    assert read_datasets(np.fromfile(latest / "array_index.h5py", dtype=np.uint8)) is None
    assert read_datasets(np.fromfile(plain / "array_index.h5py", dtype=np.uint8)) is not None
    ours, theirs = HDF5SparseSearcher(plain, threads=1), HDF5SparseSearcher(latest, threads=1)
    assert theirs.index.stats()["lists_mapped_in_place"] == ours.index.stats()["lists_mapped_in_place"] == 300
    rng = np.random.default_rng(5)
    vectors = {str(i): {int(t): float(rng.random() + 0.1) for t in rng.choice(300, 20, replace=False)}
               for i in range(5)}
    assert ours.search_vectors(vectors, 50) == theirs.search_vectors(vectors, 50)
    assert all(len(hits) == 50 for hits in ours.search_vectors(vectors, 50).values())

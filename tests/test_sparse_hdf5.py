"""The organizers' SPLADE index (naver/splade's HDF5 layout) read in place and searched exactly.

The index is written in their layout from the 894 real iKAT 2023 passages encoded by a random-weight SPLADE of the
real vocabulary (BERT-base WordPiece, 30,522 terms; no SPLADE weights reach these machines): one layer 64 wide, the
passages cut at 16 tokens, so that the 894 encode in seconds on 2 shared cores. Scores are checked against a hand
computation (float32, term by term in ascending term id: the organizers' scatter-add) and the top 1,000 against
scipy's float32 sparse product (CSR, columns ascending: the same order)."""

from __future__ import annotations

import json
import pickle
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ikatkit.errors import IkatError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from splade_random import random_splade  # noqa: E402

h5py = pytest.importorskip("h5py")
pytest.importorskip("numba")
PASSAGE_LENGTH = 16


def _encode(encoder, texts: list[str], length: int = PASSAGE_LENGTH) -> np.ndarray:
    return np.concatenate([encoder.weights(texts[i:i + 64], length) for i in range(0, len(texts), 64)])


@pytest.fixture(scope="module")
def built(passages_jsonl, tmp_path_factory) -> SimpleNamespace:
    """The 894 passages in the organizers' layout, their CSR weights, ids, texts and the encoder."""
    import scipy.sparse

    from ikatkit.index.sparse_encoder import SparseEncoder
    from ikatkit.index.sparse_hdf5 import write_hdf5_index

    root = tmp_path_factory.mktemp("organizers")
    model = random_splade(root / "model", layers=1, hidden=64, bias=-0.6)
    encoder = SparseEncoder(str(model), threads=2)
    records = [json.loads(line) for line in passages_jsonl.read_text(encoding="utf-8").splitlines()]
    ids, texts = [r["id"] for r in records], {r["id"]: r["contents"] for r in records}
    matrix = scipy.sparse.csr_matrix(_encode(encoder, list(texts.values())))
    coo = matrix.tocoo()
    folder = write_hdf5_index(root / "splade_index", ids, coo.row, coo.col, coo.data)
    return SimpleNamespace(folder=folder, ids=ids, texts=texts, matrix=matrix, encoder=encoder, model=model,
                           root=root)


def _texts(built):
    return lambda ids: {pid: built.texts[pid] for pid in ids if pid in built.texts}


def _brute_force(matrix, ids: list[str], query: np.ndarray, k: int) -> list[tuple[str, float]]:
    scores = matrix @ query.astype(np.float32)  # float32, each row's terms ascending
    order = np.lexsort((np.arange(len(scores)), -scores))
    order = order[scores[order] > 0][:k]
    return [(ids[i], float(scores[i])) for i in order]


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_the_layout_is_the_organizers(built):
    """Their datasets, names, dtypes, contiguous storage, dim, index_dist.json and pickle; opened without copies."""
    from ikatkit.index.sparse_hdf5 import is_hdf5_index, open_hdf5_index

    csc = built.matrix.tocsc()
    present = np.flatnonzero(np.diff(csc.indptr))
    with h5py.File(built.folder / "array_index.h5py", "r") as handle:
        assert handle["dim"][()] == len(present)  # their save: the number of lists, not the vocabulary
        names = ["dim"] + [f"index_doc_{kind}_{t}" for t in present for kind in ("id", "value")]
        assert sorted(handle) == sorted(names)
        term = int(present[0])
        rows, values = handle[f"index_doc_id_{term}"], handle[f"index_doc_value_{term}"]
        assert (rows.dtype, values.dtype, rows.chunks, rows.compression) == (np.int32, np.float32, None, None)
        np.testing.assert_array_equal(rows[()], csc.indices[csc.indptr[term]:csc.indptr[term + 1]])
    assert pickle.loads((built.folder / "doc_ids.pkl").read_bytes()) == built.ids
    assert json.loads((built.folder / "index_dist.json").read_text()) == {
        str(t): int(csc.indptr[t + 1] - csc.indptr[t]) for t in present}
    assert is_hdf5_index(built.folder) and not is_hdf5_index(built.root)
    index = open_hdf5_index(built.folder)
    stats = index.stats()
    assert (stats["rows"], stats["ids"], stats["terms"], stats["postings"]) == (894, 894, len(present), csc.nnz)
    assert stats["lists_mapped_in_place"] == len(present)  # every list a view of the mapped file
    assert index.ids([0, 893, 5]) == [built.ids[0], built.ids[893], built.ids[5]]
    rows, values = index.postings(int(present[-1]))
    assert rows.base is not None and not rows.flags.writeable and values.dtype == np.float32


def test_scores_equal_a_hand_computation_and_the_top_1000_a_brute_force(built, ikat2023):
    """20 real 2023 utterances, queries cut at the baseline's 256 tokens: every score the float32 sum in ascending
    term order, every ranking scipy's, on 1 and 2 threads and on torch (CPU), text and vector queries alike."""
    from ikatkit.retrieve.sparse_hdf5 import QUERY_LENGTH, HDF5SparseSearcher
    from ikatkit.topics import load_topics

    assert QUERY_LENGTH == 256
    queries = dict(list(load_topics(ikat2023 / "test_topics.json").queries("raw").items())[:20])
    searcher = HDF5SparseSearcher(built.folder, built.encoder, threads=2)
    found = searcher.batch_search(queries, k=1000)
    vectors = dict(zip(queries, searcher.encode(list(queries.values()))))
    csr, row_of = built.matrix, {pid: i for i, pid in enumerate(built.ids)}
    checked = 0
    for qid, hits in found.items():
        query = np.zeros(csr.shape[1], np.float32)
        query[list(vectors[qid])] = list(vectors[qid].values())
        assert hits == _brute_force(csr, built.ids, query, 1000), qid
        assert 100 < len(hits) <= 894
        for pid, score in hits[:40] + hits[-40:]:  # by hand: the best and the worst (scipy checked them all)
            row = row_of[pid]
            stored = dict(zip(csr.indices[csr.indptr[row]:csr.indptr[row + 1]].tolist(),
                              csr.data[csr.indptr[row]:csr.indptr[row + 1]]))
            total = np.float32(0)
            for term in sorted(vectors[qid]):
                if term in stored:
                    total = np.float32(total + np.float32(vectors[qid][term]) * stored[term])
            assert score == float(total)
            checked += 1
    assert checked == 20 * 80
    assert HDF5SparseSearcher(searcher.index, threads=1).search_vectors(vectors, 1000) == found
    assert HDF5SparseSearcher(searcher.index, device="torch:cpu").search_vectors(vectors, 1000) == found
    first = next(iter(queries))
    assert searcher.search(queries[first], k=10) == found[first][:10]
    for k in (10, 100):  # each span's heap full long before its last block: still scipy's top k
        assert searcher.search_vectors(vectors, k) == {qid: hits[:k] for qid, hits in found.items()}


def test_zipfian_lists_over_several_blocks_give_the_brute_force_top_k(tmp_path):
    """120,000 rows over 2,000 terms drawn Zipf-like (a few terms in most rows, as SPLADE's expansions are), random
    float32 weights, over two blocks and two spans a thread: the top k of 6 queries mixing frequent and rare terms are
    the brute force's, ids and float32 scores."""
    import scipy.sparse

    from ikatkit.index.sparse_hdf5 import write_hdf5_index
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    rng = np.random.default_rng(11)
    n, vocabulary, per_row = 120_000, 2_000, 30
    popularity = 1 / np.arange(1, vocabulary + 1) ** 1.1
    rows = np.repeat(np.arange(n), per_row)
    terms = rng.choice(vocabulary, n * per_row, p=popularity / popularity.sum())
    weights = rng.gamma(2.0, 0.4, n * per_row).astype(np.float32) + np.float32(0.01)
    matrix = scipy.sparse.csr_matrix((weights, (rows, terms)), shape=(n, vocabulary), dtype=np.float32)
    matrix.sum_duplicates()
    coo = matrix.tocoo()
    ids = [f"clueweb22-en0000-00-{i // 10:05d}:{i % 10}" for i in range(n)]
    folder = write_hdf5_index(tmp_path / "zipf", ids, coo.row, coo.col, coo.data)
    for threads in (1, 2):
        searcher = HDF5SparseSearcher(folder, threads=threads)
        for seed in range(6):
            chosen = np.unique(np.concatenate([rng.choice(20, 8, replace=False),
                                               rng.choice(np.arange(20, vocabulary), 30, replace=False)]))
            query = np.zeros(vocabulary, np.float32)
            query[chosen] = rng.gamma(2.0, 0.5, len(chosen)).astype(np.float32) + np.float32(0.01)
            vector = {int(t): float(query[t]) for t in chosen}
            for k in (10, 1000):
                assert searcher.search_vectors({"q": vector}, k)["q"] == _brute_force(matrix, ids, query, k), (seed, k)


def test_blocks_spans_and_ties_against_a_brute_force(tmp_path):
    """70,000 rows (several blocks and spans a thread) with exact ties: the top k by score, ties by row."""
    import scipy.sparse

    from ikatkit.index.sparse_hdf5 import write_hdf5_index
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    rng = np.random.default_rng(7)
    n, vocabulary, per_row = 70_000, 500, 12
    rows, terms = np.repeat(np.arange(n), per_row), rng.integers(0, vocabulary, n * per_row)
    weights = rng.choice(np.float32([0.25, 0.5, 1.0, 1.5]), n * per_row)  # few values: many equal scores
    matrix = scipy.sparse.csr_matrix((weights, (rows, terms)), shape=(n, vocabulary), dtype=np.float32)
    matrix.sum_duplicates()
    coo = matrix.tocoo()
    ids = [f"clueweb22-en0000-00-{i // 10:05d}:{i % 10}" for i in range(n)]
    searcher = HDF5SparseSearcher(write_hdf5_index(tmp_path / "ties", ids, coo.row, coo.col, coo.data), threads=2)
    for seed in range(4):
        query = np.zeros(vocabulary, np.float32)
        chosen = np.random.default_rng(seed).choice(vocabulary, 40, replace=False)
        query[chosen] = np.random.default_rng(seed).choice(np.float32([0.5, 1.0, 2.0]), 40)
        vector = {int(t): float(query[t]) for t in chosen}
        for k in (1, 100, 1000):
            expected = _brute_force(matrix, ids, query, k)
            assert searcher.search_vectors({"q": vector}, k)["q"] == expected
            assert k == 1 or len({score for _, score in expected}) < len(expected)  # ties among the hits


def test_chunked_and_compressed_lists_are_read_through_h5py(tmp_path):
    """The same index with gzip-compressed chunked datasets (not mappable): read through h5py, the same hits."""
    from ikatkit.index.sparse_hdf5 import write_hdf5_index
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    rng = np.random.default_rng(3)
    rows, terms = np.repeat(np.arange(3000), 10), rng.integers(0, 300, 30000)
    pairs = np.unique(np.stack([rows, terms], axis=1), axis=0)
    ids = [f"clueweb22-en0000-00-{i:05d}:0" for i in range(3000)]
    plain = write_hdf5_index(tmp_path / "plain", ids, pairs[:, 0], pairs[:, 1], rng.random(len(pairs)) + 0.1)
    packed = tmp_path / "compressed"
    packed.mkdir()
    for name in ("doc_ids.pkl", "index_dist.json"):
        shutil.copy(plain / name, packed / name)
    with h5py.File(plain / "array_index.h5py", "r") as source, h5py.File(packed / "array_index.h5py", "w") as out:
        for name in source:
            options = {} if name == "dim" else {"compression": "gzip", "chunks": True}
            out.create_dataset(name, data=source[name][()], **options)
    mapped, read = HDF5SparseSearcher(plain), HDF5SparseSearcher(packed)
    assert (mapped.index.stats()["lists_mapped_in_place"], read.index.stats()["lists_mapped_in_place"]) == (300, 0)
    vectors = {str(i): {int(t): 1.0 + i for t in rng.choice(300, 25, replace=False)} for i in range(5)}
    assert read.search_vectors(vectors, 100) == mapped.search_vectors(vectors, 100)


def _copy(built, tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(built.folder, folder)
    return folder


def test_bad_folders_are_one_clear_error_each_and_nothing_is_written(built, tmp_path):
    from ikatkit.index.sparse_hdf5 import open_hdf5_index

    no_ids = _copy(built, tmp_path, "no-ids")
    (no_ids / "doc_ids.pkl").unlink()
    truncated = _copy(built, tmp_path, "truncated")
    with (truncated / "array_index.h5py").open("r+b") as handle:
        handle.truncate((truncated / "array_index.h5py").stat().st_size // 2)
    longer, shorter, cut = (_copy(built, tmp_path, name) for name in ("longer", "shorter", "cut"))
    (longer / "doc_ids.pkl").write_bytes(pickle.dumps(built.ids + ["clueweb22-en0000-00-00000:99"]))
    (shorter / "doc_ids.pkl").write_bytes(pickle.dumps(built.ids[:-1]))
    data = (cut / "doc_ids.pkl").read_bytes()
    (cut / "doc_ids.pkl").write_bytes(data[:len(data) // 2])
    cases = [(no_ids, r"doc_ids\.pkl: no doc_ids\.pkl beside array_index\.h5py"),
             (truncated, r"array_index\.h5py: cut short"),
             (longer, r"doc_ids\.pkl: holds 895 passage ids but the postings of array_index\.h5py name 894 rows"),
             (shorter, r"doc_ids\.pkl: holds 893 passage ids but the postings of array_index\.h5py name 894 rows"),
             (cut, r"doc_ids\.pkl: cut short"),
             (tmp_path / "absent", "no such folder")]
    for folder, message in cases:
        before = _snapshot(folder) if folder.exists() else None
        with pytest.raises(IkatError, match=message) as caught:
            open_hdf5_index(folder)
        assert "fix:" in str(caught.value) and "\n" not in str(caught.value)
        assert (_snapshot(folder) if folder.exists() else None) == before


def test_a_query_model_of_another_vocabulary_is_refused(built, tmp_path):
    """A real masked LM whose WordPiece vocabulary (2,000 terms, trained here) is not the index's."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from ikatkit.index.sparse_encoder import SparseEncoder
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(list(built.texts.values()), trainers.WordPieceTrainer(
        vocab_size=2000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    folder = tmp_path / "small-vocabulary"
    fast = BertTokenizerFast(tokenizer_object=tokenizer)
    fast.save_pretrained(folder)
    BertForMaskedLM(BertConfig(vocab_size=len(fast), num_hidden_layers=1, hidden_size=64, num_attention_heads=1,
                               intermediate_size=128)).save_pretrained(folder)
    before = _snapshot(built.folder)
    with pytest.raises(IkatError, match=r"array_index\.h5py: the query model's vocabulary has 2000 terms, but the "
                                        r"index's posting lists go to term 305\d\d") as caught:
        HDF5SparseSearcher(built.folder, SparseEncoder(str(folder)))
    assert "fix: encode queries with the index's model" in str(caught.value)
    assert _snapshot(built.folder) == before


def test_weights_are_naver_splades_bit_for_bit(built, ikat2023):
    """The encoder's float32 weights are naver/splade's ``Splade.encode`` (agg max), computed here from the same
    logits as it computes them: ``max(log(1 + relu(logits)) * mask)`` over a padded batch (so the organizers'
    index and their search's query vectors are what ikatkit computes; ``log1p`` differs in about 8% of weights)."""
    import torch

    from ikatkit.topics import load_topics

    texts = list(load_topics(ikat2023 / "test_topics.json").queries("raw").values())[:8]
    encoder = built.encoder
    tokens = encoder.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    assert (tokens["attention_mask"] == 0).any()  # texts of unequal length: padding is masked
    with torch.inference_mode():
        out = encoder.model(**tokens).logits
        theirs, _ = torch.max(torch.log(1 + torch.relu(out)) * tokens["attention_mask"].unsqueeze(-1), dim=1)
    ours = encoder.weights(texts, 256)
    assert ours.dtype == np.float32 and (ours > 0).sum() > 100
    assert np.array_equal(ours, theirs.numpy())


def test_verify_passes_the_right_model_and_catches_a_wrong_length_or_model(built):
    from ikatkit.index.sparse_encoder import SparseEncoder
    from ikatkit.index.sparse_hdf5 import open_hdf5_index

    index = open_hdf5_index(built.folder)
    report = index.verify(built.encoder, _texts(built), sample=16, max_length=PASSAGE_LENGTH)
    assert report.ok, report.problems
    assert report.encoding["passages"] == 16 and report.encoding["terms_jaccard_mean"] > 0.99
    assert report.stats["postings"] == built.matrix.nnz and "the index is consistent" in str(report)
    longer = index.verify(built.encoder, _texts(built), sample=16, max_length=64)
    assert len(longer.problems) == 1 and "re-encoded at 64 tokens differ" in longer.problems[0]
    other = SparseEncoder(str(random_splade(built.root / "other-model", seed=1, layers=1, hidden=64, bias=-0.6)))
    wrong = index.verify(other, _texts(built), sample=16, max_length=PASSAGE_LENGTH)
    assert len(wrong.problems) == 1 and wrong.encoding["terms_jaccard_mean"] < 0.5


def test_verify_finds_bad_ids_and_bad_lists(tmp_path):
    from ikatkit.index.sparse_hdf5 import open_hdf5_index, write_hdf5_index

    ids = ["clueweb22-en0001-02-00003:4", "msmarco_passage_00_1", "clueweb22-en0001-02-00003:" + str(4),
           "clueweb22-en1:2"]  # the duplicate a string of its own, as the indexer's ids are (no pickle memo)
    rows, terms = np.array([0, 1, 2, 3, 0, 3]), np.array([5, 5, 5, 5, 9, 9])
    folder = write_hdf5_index(tmp_path / "bad", ids, rows, terms, np.ones(6, np.float32))
    with h5py.File(folder / "array_index.h5py", "r+") as handle:
        handle["index_doc_id_9"][...] = np.array([3, 0], np.int32)  # out of order
    (folder / "index_dist.json").write_text(json.dumps({"5": 4, "9": 3}))
    problems = open_hdf5_index(folder).verify().problems
    assert problems == [
        "1 passage ids occur more than once, e.g. clueweb22-en0001-02-00003:4",
        "2 ids are not ClueWeb22 passage ids (clueweb22-enXXXX-XX-XXXXX:N), e.g. 'msmarco_passage_00_1', "
        "'clueweb22-en1:2'",
        "index_dist.json disagrees with array_index.h5py on 1 terms, e.g. 9: 3 vs 2",
        "rows not strictly ascending in 1 lists, e.g. terms [9]"]


def test_ids_of_any_text_are_read_as_pickled(tmp_path):
    """Ids gathered and decoded in one piece come back as pickle.load reads them, an id with a newline (which the
    one-piece path cannot split) or non-ASCII text included, in the order asked, repeats too."""
    from ikatkit.index.sparse_hdf5 import PassageIds

    ids = ["clueweb22-en0000-00-00000:0", "zweite\nzeile", "ünïcödé-€", "", "clueweb22-en0000-00-00001:3" * 20]
    path = tmp_path / "doc_ids.pkl"
    path.write_bytes(pickle.dumps(ids, protocol=5))
    found = PassageIds(path)
    assert found.ids([4, 0, 2, 2]) == [ids[4], ids[0], ids[2], ids[2]]
    assert found.ids(range(len(ids))) == ids and found.ids(np.array([1, 3])) == [ids[1], ids[3]]
    assert found.ids([]) == []


def test_the_commands_read_it_as_it_comes(built, passages_jsonl, tmp_path, capsys):
    """``index stats``, ``index verify`` (with and without the model) and ``search --sparse`` over the folder as the
    organizers ship it: the run is the searcher's own ranking, it says which model encoded the queries and at which
    length, and nothing is written into the index."""
    from ikatkit.cli import main
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    before = _snapshot(built.folder)
    assert main(["index", "stats", str(built.folder)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["kind"], stats["rows"], stats["ids"]) == ("sparse-hdf5", 894, 894)
    assert stats["postings"] == built.matrix.nnz
    assert main(["index", "verify", str(built.folder)]) == 0
    assert main(["index", "verify", str(built.folder), "--model", str(built.model), "--texts", str(passages_jsonl),
                 "--max-length", str(PASSAGE_LENGTH), "--sample", "8"]) == 0
    assert main(["index", "verify", str(built.folder), "--model", str(built.model)]) == 2
    assert "needs both the model and the passages' texts" in capsys.readouterr().err
    queries = tmp_path / "queries.tsv"
    texts = ["vegetarian protein for a marathon runner", "how do I treat a sprained ankle", "cheap flights to Lisbon"]
    queries.write_text("".join(f"q{i}\t{t}\n" for i, t in enumerate(texts)), encoding="utf-8")
    out = tmp_path / "run.trec"
    capsys.readouterr()
    assert main(["search", "--sparse", str(built.folder), "--sparse-model", str(built.model), "--sparse-max-length",
                 str(PASSAGE_LENGTH), "--threads", "1", "--queries", str(queries), "--k", "50", "--out", str(out)]) == 0
    said, err = capsys.readouterr()
    assert f"(queries encoded by {built.model})" in said and f"opening {built.folder} (splade)" in err
    expected = HDF5SparseSearcher(built.folder, built.encoder, threads=1, max_length=PASSAGE_LENGTH).batch_search(
        {f"q{i}": t for i, t in enumerate(texts)}, 50)
    rows = [line.split() for line in out.read_text(encoding="utf-8").splitlines()]
    for qid, hits in expected.items():
        assert hits and [(r[2], float(r[4])) for r in rows if r[0] == qid] == [(p, pytest.approx(s, abs=1e-4))
                                                                               for p, s in hits]
    assert _snapshot(built.folder) == before
    assert main(["search", "--sparse", str(built.folder), "--allow-other-model", "--queries", str(queries),
                 "--out", str(out)]) == 2
    assert "--allow-other-model is for indexes whose manifest names a model" in capsys.readouterr().err
    broken = _copy(built, tmp_path, "no-ids")
    (broken / "doc_ids.pkl").unlink()  # refused for the folder before a model (here one not on the machine) loads
    assert main(["search", "--sparse", str(broken), "--sparse-model", "no/such-model", "--queries", str(queries),
                 "--out", str(tmp_path / "none.trec")]) == 2
    err = capsys.readouterr().err
    assert "doc_ids.pkl" in err and "no/such-model" not in err and not (tmp_path / "none.trec").exists()


def _over_the_organizers_layout(name: str, built, tmp_path: Path) -> Path:
    """The shipped config ``name`` with only the SPLADE path changed, and what loads offline put in: the random query
    model (at the index's passage length), a cross-encoder made from MiniLM re-ranking the top 3 at 128 tokens, and
    the top passage as the answer in place of the GPU LLM's."""
    import torch
    from sentence_transformers import CrossEncoder

    from ikatkit.models import resolve_model

    torch.manual_seed(0)
    cross_encoder = tmp_path / "cross-encoder"
    CrossEncoder(resolve_model("bundled:minilm"), num_labels=1).save(str(cross_encoder))
    text = (ROOT / "configs" / name).read_text(encoding="utf-8")
    for shipped, here in (('model = "cross-encoder/ms-marco-MiniLM-L-12-v2"',
                           f'model = "{cross_encoder}"\nmax_length = 128'),
                          ('path = "indexes/ikat23-splade"\nmodel = "naver/splade-cocondenser-ensembledistil"',
                           f'path = "{built.folder}"\nmodel = "{built.model}"\nmax_length = {PASSAGE_LENGTH}'),
                          ('task = "rtg_response"', 'task = "extractive"')):
        assert shipped in text
        text = text.replace(shipped, here)
    rerank = 'stage = "rerank"\nranker = "reranker"\n'
    text = text.replace(rerank + "depth = 100", rerank + "depth = 3") if rerank + "depth" in text \
        else text.replace(rerank, rerank + "depth = 3\n")
    text = text[:text.index("[resources.llm]")] + text[text.index("[resources.reranker]"):]
    config = tmp_path / name
    config.write_text(text, encoding="utf-8")
    return config


def _exact_and_texts_read(records, built) -> None:
    """Every turn's SPLADE candidates are the exact search's top 1,000; the answer is the top re-ranked passage's
    text, read from the BM25 index."""
    from ikatkit.retrieve.sparse_hdf5 import HDF5SparseSearcher

    searcher = HDF5SparseSearcher(built.folder, built.encoder, max_length=PASSAGE_LENGTH)
    for record in records:
        first, found = searcher.search(record.query, 1000), record.candidates[f"splade\t{record.query}"]
        assert first and [pid for pid, _ in found] == [pid for pid, _ in first]
        assert [s for _, s in found] == pytest.approx([s for _, s in first], rel=1e-5)
        top = record.used[0]
        assert top in built.texts and record.response[:60] in " ".join(built.texts[top].split())


def test_the_baseline_config_runs_over_it_with_the_texts_of_the_bm25_index(built, passages_index, ikat2023, tmp_path):
    """configs/splade_rr_baseline.toml over the organizers' layout (:func:`_over_the_organizers_layout`), on all 25
    conversations of the 2023 test topics: every turn's SPLADE top 1,000 is the exact search's, re-ranking and
    responses read their texts from the BM25 index, the run's manifest says what searched, and the run validates as
    an official one."""
    from ikatkit.pipelines import run_pipeline
    from ikatkit.topics import load_topics

    config = _over_the_organizers_layout("splade_rr_baseline.toml", built, tmp_path)
    topics = load_topics(ikat2023 / "test_topics.json")
    outcome = run_pipeline(config, topics, tmp_path / "run", index=passages_index, cache_dir=tmp_path / "cache")
    assert outcome.valid is True and len(outcome.records) == len(topics)
    said = json.loads((tmp_path / "run" / "manifest.json").read_text())["resource_stats"]["splade"]
    assert said == {"index": str(built.folder), "rows": 894, "query_model": str(built.model),
                    "query_max_length": PASSAGE_LENGTH, "device": "cpu", "threads": None, "queries": len(topics)}
    _exact_and_texts_read(outcome.records, built)


def test_the_interactive_config_runs_over_it_against_the_simulator(built, passages_index, ikat2023, tmp_path,
                                                                    monkeypatch):
    """configs/interactive_splade_rr.toml over the organizers' layout, driven by the local simulator over HTTP
    (replayed users of two 2023 test conversations): every turn answered, each turn's SPLADE candidates the exact
    search's, the dump valid."""
    from ikatkit.interactive.driver import run_interactive
    from ikatkit.runs.validate import validate_run
    from ikatkit.simulate.server import Simulator
    from ikatkit.simulate.users import replay_users
    from ikatkit.topics import load_topics

    from serving import serve

    topics = load_topics(ikat2023 / "test_topics.json")
    topics = topics.subset([c.id for c in topics.conversations[:2]])
    monkeypatch.setenv("IKAT_API_TOKEN", "organizers-layout")
    config = _over_the_organizers_layout("interactive_splade_rr.toml", built, tmp_path)
    with serve(Simulator(replay_users(topics), {"organizers-layout": "team"})) as url:
        outcome = run_interactive(config, url, "splade", tmp_path / "out", index=passages_index, progress=False)
    assert outcome.turns == len(topics.qids)
    turns = [json.loads(p.read_text()) for p in (tmp_path / "out" / "turns").glob("user-*/*.json")]
    records = [turn["record"] for turn in turns if not turn.get("farewell")]  # each user's goodbye gets no answer
    assert sorted(r["qid"] for r in records) == sorted(topics.qids)
    _exact_and_texts_read([SimpleNamespace(**r) for r in records], built)
    report = validate_run(outcome.dump_file, topics)
    assert report.ok, str(report)

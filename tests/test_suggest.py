"""A typo in a config or a path: one line with "did you mean" (difflib's close matches among what exists), the
place named with its stage, said before anything loads, and no empty output folder left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ikatkit.cli import main
from ikatkit.errors import IkatError
from ikatkit.suggest import close_matches, did_you_mean, path_fix

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "robustness_raw_biencoder.toml"  # resources minilm (bundled:minilm) and bm25


def _typo(tmp_path: Path, old: str, new: str) -> Path:
    text = CONFIG.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "typo.toml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def _run_error(capsys, config: Path, demo_dir: Path, tmp_path: Path, *extra: str) -> str:
    out = tmp_path / "runs" / "x"
    assert main(["run", str(config), "--topics", str(demo_dir / "topics.json"), "--out", str(out), *extra]) == 2
    assert not out.exists()  # nothing made for a run that never started
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_close_matches_as_difflib_finds_them():
    assert close_matches("minlm", ["bm25", "minilm"]) == ["minilm"]
    assert did_you_mean("minlm", ["bm25", "minilm"], "declare it") == "did you mean 'minilm'? declare it"
    assert did_you_mean("splade", ["bm25", "minilm"], "declare it") == "declare it"


def test_a_mistyped_resource_names_the_declared_one_and_the_stage(tmp_path, demo_dir, capsys):
    line = _run_error(capsys, _typo(tmp_path, 'ranker = "minilm"', 'ranker = "minlm"'), demo_dir, tmp_path)
    assert line.endswith("typo.toml (stages[2].ranker (rerank)): ranker 'minlm' is not a declared resource — "
                         "fix: did you mean 'minilm'?")


def test_a_mistyped_stage(tmp_path, demo_dir, capsys):
    line = _run_error(capsys, _typo(tmp_path, 'stage = "rerank"', 'stage = "rerank_"'), demo_dir, tmp_path)
    assert "unknown stage 'rerank_' — fix: did you mean 'rerank'" in line


def test_a_mistyped_bundled_model_is_refused_before_anything_loads(tmp_path, demo_dir, capsys):
    from ikatkit.models import resolve_model

    with pytest.raises(IkatError) as caught:
        resolve_model("bundled:minlm")  # never passed on to the hub as a repo id
    assert str(caught.value) == ("bundled:minlm: no such bundled model — fix: did you mean 'bundled:minilm'? use "
                                 "one of ['bundled:minilm', 'bundled:smollm2']")
    config = _typo(tmp_path, 'model = "bundled:minilm"', 'model = "bundled:minlm"')
    line = _run_error(capsys, config, demo_dir, tmp_path)
    assert "no such bundled model: 'bundled:minlm' (resources.minilm.model, line 9)" in line
    assert "did you mean 'bundled:minilm'?" in line and "OSError" not in line


def test_mistyped_paths(tmp_path, demo_dir, capsys):
    line = _run_error(capsys, tmp_path / "robustnes_raw_biencoder.toml", demo_dir, tmp_path)
    assert "config not found" in line and "pass one of the files in configs/" in line  # nothing close there
    (tmp_path / "robustness_raw_biencoder.toml").write_text(CONFIG.read_text(encoding="utf-8"))
    line = _run_error(capsys, tmp_path / "robustnes_raw_biencoder.toml", demo_dir, tmp_path)
    assert f"did you mean '{tmp_path / 'robustness_raw_biencoder.toml'}'?" in line
    (tmp_path / "index").mkdir()
    line = _run_error(capsys, CONFIG, demo_dir, tmp_path, "--index", str(tmp_path / "indx"))
    assert "no index folder here — fix: did you mean" in line and str(tmp_path / "index") in line



def test_a_relative_path_is_suggested_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert path_fix("topics.jsn", "pass topics") == "pass topics"
    (tmp_path / "topics.json").touch()
    assert path_fix("topics.jsn", "pass topics") == "did you mean 'topics.json'? pass topics"


def test_a_wrong_index_leaves_no_output_folder(tmp_path, demo_dir, capsys):
    (tmp_path / "empty").mkdir()
    line = _run_error(capsys, CONFIG, demo_dir, tmp_path, "--index", str(tmp_path / "empty"))
    assert "not a Lucene index" in line


def test_a_path_of_the_other_kind_is_said_so_and_never_suggested_back(ikat2023, tmp_path, capsys):
    qrels, topics = ikat2023 / "qrels.txt", ikat2023 / "test_topics.json"
    assert main(["search", "--index", str(qrels), "--topics", str(topics), "--out", str(tmp_path / "x.trec")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"ikatkit: error: {qrels}: no index folder here — fix: it is a file, not a folder: give the folder of a "
        "Lucene index")  # was "did you mean '.../qrels.txt' or '.../ptkb_qrels.nist.txt'?"
    (tmp_path / "runs" / "raw-bm25").mkdir(parents=True)
    (tmp_path / "runs" / "raw-bm25.json").write_text("{}")  # the file of the wanted kind is suggested, not the folder
    assert path_fix(tmp_path / "runs" / "raw-bm25", "pass a run file") == (
        f"did you mean '{tmp_path / 'runs' / 'raw-bm25.json'}'? it is a folder, not a file: pass a run file")


def test_a_run_folder_names_its_run_file(ikat2023, tmp_path, capsys):
    folder = tmp_path / "runs" / "raw"
    folder.mkdir(parents=True)
    for name in ("raw-bm25.json", "raw-bm25.trec"):
        (folder / name).write_text("9-1_1 Q0 d:1 1 1.0 raw-bm25\n")
    (folder / "manifest.json").write_text('{"files": {"run": "raw-bm25.json", "trec": "raw-bm25.trec"}}')
    assert main(["eval", str(folder), "--qrels", str(ikat2023 / "qrels.txt")]) == 2
    assert capsys.readouterr().err == (
        f"ikatkit: error: {folder}: a run folder, not a run file — fix: pass its run file, {folder / 'raw-bm25.json'} "
        f"(or its TREC run, {folder / 'raw-bm25.trec'})\n")  # was "did you mean 'runs/raw'?"

"""``index build`` over a finished index: the same inputs do nothing, other inputs are refused in one line naming the
fix, and ``--rebuild`` replaces the index once the new one is built (issue 69)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PASSAGES = Path(__file__).resolve().parent / "data" / "release-56c3078" / "passages.jsonl"

pytestmark = pytest.mark.slow


def test_other_inputs_over_a_finished_index_are_refused_unless_rebuilt(tmp_path, capsys):
    from ikatkit.cli import main

    fewer = tmp_path / "fewer.jsonl"
    fewer.write_text("".join(PASSAGES.read_text(encoding="utf-8").splitlines(keepends=True)[:10]), encoding="utf-8")
    out = tmp_path / "index"
    assert main(["index", "build", str(PASSAGES), "--out", str(out), "--threads", "1"]) == 0
    assert "indexed 24 passages" in capsys.readouterr().out
    assert main(["index", "build", str(PASSAGES), "--out", str(out), "--threads", "1"]) == 0
    assert "already built: 24 passages" in capsys.readouterr().out
    before = (out / "manifest.json").read_text(encoding="utf-8")
    assert main(["index", "build", str(fewer), "--out", str(out), "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert "this folder holds an index of other inputs (built from 1 file(s) of" in err and "24 passages" in err
    assert "pass --rebuild to replace it" in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert (out / "manifest.json").read_text(encoding="utf-8") == before  # nothing changed
    assert main(["index", "build", str(fewer), "--out", str(out), "--threads", "1", "--rebuild"]) == 0
    assert "indexed 10 passages" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "bm25" and manifest["counts"]["passages"] == 10
    assert [s["path"] for s in manifest["sources"]] == [str(fewer)]
    assert not list(tmp_path.glob(".index.building-*"))  # the replaced index is gone with the work folder
    assert main(["index", "build", str(PASSAGES), "--out", str(out), "--format", "jsonl", "--threads", "1"]) == 2
    assert "--format auto, now jsonl" in capsys.readouterr().err

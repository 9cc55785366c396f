"""The viewer of a 2026 interactive run with rubric qrels (issue 69: refused as "rubric-based qrels", or, with turn
qrels, every measure empty and every grade "–" without a word): each turn graded and measured by the rubric its
user pursued, the rubric's id beside it, and the per-user-type table of ``eval --by user-type`` (the same code);
qrels that grade no turn are one clear error. The run is the hand-made 2026 dump of the eval tests (two users,
two types, two rubrics), so every figure is computed by hand there and here."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from test_crosscheck import _cli
from test_eval_cli import A, B, _pid, interactive_2026


def _turn(page: str, key: str) -> str:
    """The HTML of one turn's section of a conversation page."""
    found = re.search(rf'<section class=turn id="t\d+" data-key="{re.escape(key)}".*?</section>', page, re.S)
    assert found, key
    return found.group(0)


def _grades(section: str) -> dict[str, str]:
    """passage id -> the grade shown (a number, or – for unjudged)."""
    rows = re.findall(r"<td>(clueweb22-[^<]+)</td><td class=n>[^<]*</td><td class=n>(.*?)</td>", section)
    return {pid: html.unescape(re.sub(r"<[^>]+>", "", grade)) for pid, grade in rows}


@pytest.fixture(scope="module")
def viewed(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    folder = tmp_path_factory.mktemp("view2026")
    dump, rubrics, qrels = interactive_2026(folder)
    out = folder / "view"
    code, printed, err = _cli(["view", str(dump), "--out", str(out), "--qrels", str(qrels), "--rubrics", str(rubrics),
                               "--measures", "P@1", "RR"])
    assert code == 0, err
    return out, dump, rubrics, qrels


def test_each_turn_graded_and_measured_by_its_rubric(viewed):
    """Qrels: rubric 1 judges p1 2, p2 0; rubric 2 judges p3 1. User a's turns 1-3 pursue rubric 1 (citing p1 p2:
    P@1 1, RR 1; p2 p1: 0, 1/2; p9: 0, 0), its turn 4 rubric 2 (p4 p3: 0, 1/2); user b's turn 1 rubric 1 (p2 p1: 0,
    1/2). Per page: a's P@1 1/4, RR 2/4; b's 0 and 1/2."""
    out = viewed[0]
    page_a = (out / "c" / f"{A}_1-1.html").read_text(encoding="utf-8")
    first = _turn(page_a, f"{A}/1-1_1")
    assert "rubric rub_1-1_1: Which fruits are safe?" in html.unescape(first)
    assert _grades(first) == {_pid(1): "2", _pid(2): "0"}
    assert "P@1 1.0000, RR 1.0000" in first
    assert _grades(_turn(page_a, f"{A}/1-1_3")) == {_pid(9): "\u2013"}  # not judged for rubric 1
    assert "P@1 0.0000, RR 0.0000" in _turn(page_a, f"{A}/1-1_3")
    fourth = _turn(page_a, f"{A}/1-1_4")
    assert "rubric rub_1-1_2: What about vegetables?" in html.unescape(fourth)
    assert _grades(fourth) == {_pid(4): "\u2013", _pid(3): "1"} and "P@1 0.0000, RR 0.5000" in fourth
    page_b = (out / "c" / f"{B}_1-1.html").read_text(encoding="utf-8")
    assert _grades(_turn(page_b, f"{B}/1-1_1")) == {_pid(2): "0", _pid(1): "2"}
    index = (out / "index.html").read_text(encoding="utf-8")
    rows = dict(re.findall(r"<td>(user-[ab])</td><td>u\d</td>.*?<td class=n>\d+</td>(.*?)</tr>", index, re.S))
    assert [re.findall(r"<td class=n>([\d.]+)</td>", rows[u])[:2] for u in (A, B)] == [["0.2500", "0.5000"],
                                                                                     ["0.0000", "0.5000"]]


def test_the_overview_has_the_per_user_type_table_of_eval(viewed):
    """The table `eval --by user-type` prints of the same run, rubric qrels and measures (the last try stands for a
    rubric): all 3 reached of 4, u1 2 of 2 (P@1 0, RR 1/4), u2 1 of 2 (RR 1/2)."""
    from eval_table import eval_table


    out, dump, rubrics, qrels = viewed
    index = (out / "index.html").read_text(encoding="utf-8")
    table = re.search(r'<table class=sortable id="types-0">(.*?)</table>', index, re.S)
    assert table and "<h2>dump: passage ranking per user type</h2>" in index
    shown = {cells[0]: cells[1:] for cells in (re.findall(r"<td(?: class=n)?>([^<]*)</td>", row)
                                                for row in re.findall(r"<tr>(<td.*?)</tr>", table.group(1)))}
    assert shown == {"all": ["3", "4", "0.7500", "0.0000", "0.3333"], "u1": ["2", "2", "1.0000", "0.0000", "0.2500"],
                     "u2": ["1", "2", "0.5000", "0.0000", "0.5000"]}
    code, printed, _ = _cli(["eval", str(dump), "--qrels", str(qrels), "--rubrics", str(rubrics), "--measures", "P@1",
                             "RR", "--by", "user-type"])
    assert code == 0
    printed_table = eval_table(printed)
    assert {k: list(v.values()) for k, v in printed_table.items()} == shown


def test_qrels_that_grade_no_turn_are_one_clear_error(tmp_path):
    """Rubric qrels without the rubrics; the 2023 turn qrels for a 2026 run (its turn ids count the user's
    utterances); rubric qrels for an offline run; rubric qrels judging no rubric the users pursued; turn qrels of
    other topics for an offline run: each refused in one line, nothing written."""
    dump, rubrics, qrels = interactive_2026(tmp_path)
    out = tmp_path / "view"
    offline = tmp_path / "qrels.txt"
    offline.write_text(f"1-1_1 0 {_pid(2)} 2\n")
    other = tmp_path / "other-rubric-qrels.txt"
    other.write_text(f"rub_2-1_1 {_pid(1)} 2\n")
    trec = tmp_path / "run.trec"
    trec.write_text(f"9-1_1 Q0 {_pid(1)} 1 1.0 r\n")
    cases = [([str(dump), "--qrels", str(qrels)], "rubric-based qrels (rubric_id doc:passage rel) grade each turn "
                                                  "by the rubric its user pursued: they need the rubrics"),
             ([str(dump), "--qrels", str(offline)], "is interactive: its turn ids"),
             ([str(trec), "--qrels", str(qrels), "--rubrics", str(rubrics)], "run run is not interactive"),
             ([str(dump), "--qrels", str(other), "--rubrics", str(rubrics)], "no rubric the run's users pursued is "
                                                                             "judged in the rubric qrels"),
             ([str(trec), "--qrels", str(offline)], "the qrels judge none of the runs' turns (qrels: e.g. 1-1_1; "
                                                    "runs: e.g. 9-1_1)")]
    for args, said in cases:
        code, _, err = _cli(["view", *args, "--out", str(out)])
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1, (args, err)
        assert "Traceback" not in err and not out.exists()

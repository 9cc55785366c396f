"""The promise of docs/evaluation.md: every figure `eval`, `eval-ptkb`, `eval-responses`, `compare` and `report` print
is recomputed here another way and asserted equal. Per-turn measures come from pytrec_eval called directly on
rankings and qrels this module builds and parses itself (not through ikatkit's readers), ROUGE from rouge-score,
intervals and paired tests from numpy and scipy.stats, Holm's correction and Judged@k by hand, a small case by hand
(the formulas written out). Real data: the 2023 test year (its qrels, NIST PTKB qrels, topics and the SPLADE
reference run); two official 2023 runs are made from them once per module (``runs``) and compared once
(``compared``, ``reported``)."""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import math
import re
import shutil
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from ikatkit.cli import main

TRACK = {"nDCG@3": ("ndcg_cut.3", "ndcg_cut_3", 1), "nDCG@5": ("ndcg_cut.5", "ndcg_cut_5", 1),
         "nDCG@1000": ("ndcg_cut.1000", "ndcg_cut_1000", 1), "P(rel=2)@20": ("P.20", "P_20", 2),
         "R(rel=2)@20": ("recall.20", "recall_20", 2), "AP(rel=2)": ("map", "map", 2)}
PTKB = {"nDCG@5": ("ndcg_cut.5", "ndcg_cut_5", 1), "P@5": ("P.5", "P_5", 1), "R@5": ("recall.5", "recall_5", 1),
        "AP": ("map", "map", 1)}
ROUGE = {"ROUGE-1": "rouge1", "ROUGE-2": "rouge2", "ROUGE-L": "rougeL"}


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            qid, _, docid, grade = line.split()
            qrels.setdefault(qid, {})[docid] = int(grade)
    return qrels


def trec_eval(qrels: dict, run: dict, measures: dict) -> dict[str, dict[str, float]]:
    """``{qid: {measure: value}}`` by pytrec_eval, one evaluator per relevance level, over the run's judged turns."""
    import pytrec_eval

    ranked = {q: docs for q, docs in run.items() if q in qrels and docs}
    values: dict[str, dict[str, float]] = {q: {} for q in ranked}
    for level in {m[2] for m in measures.values()}:
        chosen = {name: m for name, m in measures.items() if m[2] == level}
        found = pytrec_eval.RelevanceEvaluator(qrels, {m[0] for m in chosen.values()},
                                               relevance_level=level).evaluate(ranked)
        for q, result in found.items():
            values[q].update({name: result[m[1]] for name, m in chosen.items()})
    return values


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment by hand: the i-th smallest of m p-values times (m - i), running maximum, at most 1;
    nan is no test."""
    live = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    adjusted, running = list(pvalues), 0.0
    for rank, (p, i) in enumerate(live):
        running = max(running, min(1.0, (len(live) - rank) * p))
        adjusted[i] = running
    return adjusted


def interval(values: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return values.mean() - half, values.mean() + half


def p_text(p: float) -> str:
    """How a p-value reads in every table: three decimals, ``< 0.001`` below that."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


@dataclass
class Runs:
    year: Path
    paths: dict[str, Path]
    rankings: dict[str, dict[str, dict[str, float]]]
    ptkb: dict[str, dict[str, dict[str, float]]]
    responses: dict[str, dict[str, str]]
    references: dict[str, str]
    qrels: dict[str, dict[str, int]]
    ptkb_qrels: dict[str, dict[str, int]]


@pytest.fixture(scope="module")
def runs(ikat2023, tmp_path_factory) -> Runs:
    """``manual``: the reference run's ranking with its top 10 reversed, every 7th judged turn left out, the gold
    PTKB provenance (empty on most turns) and the first 25 words of the canonical response; ``automatic``: the
    reference ranking, every PTKB statement in reverse key order and every second word of the canonical response.
    Scores are integers (no ties, exact in the run files' float32)."""
    from ikatkit.runs.io import write_run
    from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
    from ikatkit.topics import load_topics

    topics = load_topics(ikat2023 / "test_topics.json")
    raw = json.loads((ikat2023 / "test_topics.json").read_text())
    gold = {f"{c['number']}_{t['turn_id']}": [str(k) for k in t.get("ptkb_provenance") or []]
            for c in raw for t in c["turns"]}
    references = {f"{c['number']}_{t['turn_id']}": t.get("response") or "" for c in raw for t in c["turns"]}
    reference = json.loads((ikat2023 / "reference_run" / "splade_deberta_run.json").read_text())
    qrels = read_qrels(ikat2023 / "qrels.txt")
    dropped = set(sorted(qrels)[::7])
    out = tmp_path_factory.mktemp("crosscheck")
    data = Runs(ikat2023, {}, {}, {}, {}, {k: v for k, v in references.items() if v.strip()}, qrels,
                read_qrels(ikat2023 / "ptkb_qrels.nist.txt"))
    for name in ("manual", "automatic"):
        run = Run(name, name, [], 2023, "uva")
        ranking, ptkb, responses = {}, {}, {}
        for turn in topics:
            qid = turn.qid
            if name == "manual" and qid in dropped:
                continue
            order = sorted(reference.get(qid, {}), key=lambda d: -reference[qid][d])
            order = order[:10][::-1] + order[10:] if name == "manual" else order
            ranking[qid] = {d: float(len(order) - i) for i, d in enumerate(order)}
            statements = topics.conversation_of(qid).ptkb
            keys = gold[qid] if name == "manual" else sorted(statements, key=int, reverse=True)
            ptkb[qid] = {k: float(len(keys) - i) for i, k in enumerate(keys)}
            words = references[qid].split()
            responses[qid] = " ".join(words[:25] if name == "manual" else words[::2]) or "No answer."
            passages = [PassageRef(d, s, "", i < 3) for i, (d, s) in enumerate(ranking[qid].items())]
            run.turns.append(TurnResult(qid, [Response(1, responses[qid], passages or [PassageRef(
                "clueweb22-en0000-00-00000:0", 1.0, "", True)], [PtkbRef(k, s, statements[k])
                                                                for k, s in ptkb[qid].items()])]))
            if not passages:  # the stand-in passage is what the run ranks
                ranking[qid] = {"clueweb22-en0000-00-00000:0": 1.0}
        data.paths[name] = out / f"{name}.json"
        write_run(run, data.paths[name], "2023")
        data.rankings[name], data.ptkb[name], data.responses[name] = ranking, ptkb, responses
    return data


def _cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def _comparison(command: str, runs: Runs, out: Path) -> tuple[int, str, str]:
    """``ikatkit compare`` or ``report`` of both runs with passage and PTKB qrels, TRACK and ROUGE measures."""
    return _cli([command, *(f"{n}={p}" for n, p in runs.paths.items()), "--qrels", str(runs.year / "qrels.txt"),
                 "--ptkb-qrels", str(runs.year / "ptkb_qrels.nist.txt"),
                 "--topics", str(runs.year / "test_topics.json"), "--measures", *TRACK, *ROUGE, "--out", str(out)])


@pytest.fixture(scope="module")
def compared(runs, tmp_path_factory) -> tuple[Path, str]:
    """``ikatkit compare manual automatic`` with passage and PTKB qrels and ROUGE: its folder and terminal text."""
    out = tmp_path_factory.mktemp("compare")
    code, printed, err = _comparison("compare", runs, out)
    assert code == 0, err
    return out, printed


@pytest.fixture(scope="module")
def reported(runs, tmp_path_factory) -> Path:
    """``ikatkit report`` of the same comparison: the HTML file."""
    out = tmp_path_factory.mktemp("report")
    code, _, err = _comparison("report", runs, out)
    assert code == 0, err
    return out / "report.html"


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table line."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tsv(text: str) -> dict[tuple[str, str], float]:
    return {(m, q): float(v) for m, q, v in (line.split("\t") for line in text.splitlines() if line[:1] != "#")}


def test_eval_means_and_per_turn_values_are_pytrec_evals(runs):
    """`eval --per-query` (TSV) and `--format json`: each turn's value and each mean, for a run that leaves judged
    turns out (skipped by default, 0 with --missing zero), and the counts below the table."""
    expected = trec_eval(runs.qrels, runs.rankings["manual"], TRACK)
    code, printed, err = _cli(["eval", str(runs.paths["manual"]), "--qrels", str(runs.year / "qrels.txt"),
                               "--per-query"])
    values = _tsv(printed)
    assert code == 0 and len(expected) == len(runs.qrels) - len(sorted(runs.qrels)[::7])
    for measure in TRACK:
        assert values[(measure, "all")] == pytest.approx(np.mean([v[measure] for v in expected.values()]), abs=1e-6)
        for qid, v in expected.items():
            assert values[(measure, qid)] == pytest.approx(v[measure], abs=1e-6), (measure, qid)
    assert printed.splitlines()[-1] == (
        f"# means over the {len(expected)} judged turns the run has (of {len(runs.qrels)} in the qrels); "
        f"{len(runs.qrels) - len(expected)} judged turns missing from the run (left out, as trec_eval does; "
        "--missing zero scores them 0)") and err == ""
    code, printed, err = _cli(["eval", str(runs.paths["manual"]), "--qrels", str(runs.year / "qrels.txt"),
                               "--missing", "zero", "--format", "json"])
    result = json.loads(printed)
    for measure in TRACK:
        total = sum(v[measure] for v in expected.values())
        assert result["mean"][measure] == pytest.approx(total / len(runs.qrels), abs=1e-12)
    assert result["evaluated"] == len(expected) and sorted(result["missing"]) == sorted(set(runs.qrels) - set(expected))


def test_eval_small_case_by_hand(tmp_path):
    """Three judged passages, a ranking of four, the formulas written out."""
    (tmp_path / "qrels.txt").write_text("1-1_1 0 d:1 3\n1-1_1 0 d:2 0\n1-1_1 0 d:3 2\n1-1_1 0 d:9 1\n")
    (tmp_path / "run.trec").write_text("".join(f"1-1_1 Q0 d:{d} {r} {5 - r} x\n" for r, d in enumerate("2314", 1)))
    code, printed, _ = _cli(["eval", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.txt"),
                             "--measures", "nDCG@3", "P(rel=2)@20", "R(rel=2)@20", "AP(rel=2)", "RR(rel=2)"])
    values = _tsv(printed)
    # ranked d:2 (0), d:3 (2), d:1 (3), d:4 (unjudged); ideal 3, 2, 1. DCG = sum gain / log2(rank + 1)
    dcg = 0 / math.log2(2) + 2 / math.log2(3) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    # relevant at grade >= 2: d:3 (rank 2), d:1 (rank 3); AP = (1/2 + 2/3) / 2; first relevant at rank 2
    assert values[("nDCG@3", "all")] == pytest.approx(dcg / ideal, abs=1e-6)
    assert values[("P(rel=2)@20", "all")] == pytest.approx(2 / 20, abs=1e-6)
    assert values[("R(rel=2)@20", "all")] == pytest.approx(1.0, abs=1e-6)
    assert values[("AP(rel=2)", "all")] == pytest.approx((1 / 2 + 2 / 3) / 2, abs=1e-6)
    assert values[("RR(rel=2)", "all")] == pytest.approx(1 / 2, abs=1e-6)


def test_eval_ptkb_values_and_counts(runs):
    """`eval-ptkb --per-query --format json` of the manual run (gold PTKB): pytrec_eval at relevance 1 on the
    PTKB keys it lists, and the two kinds of unevaluated turn counted apart."""
    expected = trec_eval(runs.ptkb_qrels, runs.ptkb["manual"], PTKB)
    code, printed, err = _cli(["eval-ptkb", str(runs.paths["manual"]), "--qrels",
                               str(runs.year / "ptkb_qrels.nist.txt"), "--per-query", "--format", "json"])
    result = json.loads(printed)
    assert code == 0 and result["evaluated"] == len(expected)
    for measure in PTKB:
        assert result["mean"][measure] == pytest.approx(np.mean([v[measure] for v in expected.values()]), abs=1e-12)
        for qid, v in expected.items():
            assert result["per_query"][qid][measure] == pytest.approx(v[measure], abs=1e-12)
    empty = sum(q in runs.ptkb["manual"] and not runs.ptkb["manual"][q] for q in runs.ptkb_qrels)
    absent = sum(q not in runs.ptkb["manual"] for q in runs.ptkb_qrels)
    assert empty > 0 and absent > 0 and len(expected) + empty + absent == len(runs.ptkb_qrels)
    assert err.strip() == (f"means over the {len(expected)} judged turns the run has (of {len(runs.ptkb_qrels)} in "
                           f"the qrels); {empty} judged turns in the run with an empty PTKB provenance list, {absent} "
                           "judged turns not in the run (left out, as trec_eval does; --missing zero scores them 0)")


def _rouge(responses: dict[str, str], references: dict[str, str]) -> dict[str, dict[str, float]]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE.values()), use_stemmer=True)
    values = {}
    for qid, response in responses.items():
        if qid in references:
            scores = scorer.score(references[qid], response)
            values[qid] = {name: scores[key].fmeasure for name, key in ROUGE.items()}
    return values


def test_eval_responses_are_rouge_scores(runs):
    """`eval-responses --per-query --format json`: rouge-score's F1 (Porter stemmer) of each rank-1 response
    against the topics' canonical response, and the means."""
    code, printed, _ = _cli(["eval-responses", f"automatic={runs.paths['automatic']}", "--topics",
                             str(runs.year / "test_topics.json"), "--measures", *ROUGE, "--per-query",
                             "--format", "json"])
    result = json.loads(printed)["automatic"]
    expected = _rouge(runs.responses["automatic"], runs.references)
    assert code == 0 and set(result["per_query"]) == set(expected)
    for measure in ROUGE:
        assert result["mean"][measure] == pytest.approx(np.mean([v[measure] for v in expected.values()]), abs=1e-9)
        for qid, v in expected.items():
            assert result["per_query"][qid][measure] == pytest.approx(v[measure], abs=1e-9)


def _expected_table(per_turn: dict[str, dict[str, dict[str, float]]], measures, missing: str = "skip",
                    judged: list[str] | None = None) -> list[dict]:
    """Rows of a comparison recomputed: per run and measure, over the turns both runs have a value for (all of
    ``judged``, 0 where missing, with ``missing="zero"``), mean, interval, delta, t-test, wins/ties/losses; Holm
    over the table."""
    from scipy import stats

    rows = []
    for name in per_turn:
        for measure in measures:
            if missing == "zero":
                turns = judged
            else:
                turns = sorted(q for q in per_turn["manual"] if q in per_turn["automatic"]
                               and measure in per_turn["manual"][q] and measure in per_turn["automatic"][q])
            x = np.array([per_turn["manual"].get(q, {}).get(measure, 0.0) for q in turns])
            y = np.array([per_turn[name].get(q, {}).get(measure, 0.0) for q in turns])
            p = math.nan if not np.any(y - x) else float(stats.ttest_rel(y, x).pvalue)
            rows.append({"run": name, "measure": measure, "mean": y.mean(), "ci": interval(y), "delta": (y - x).mean(),
                         "p": p, "wins": int((y > x).sum()), "ties": int((y == x).sum()),
                         "losses": int((y < x).sum()), "turns": len(turns)})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_adjusted"] = adjusted
    return rows


def _check_csv(path: Path, expected: list[dict]) -> None:
    rows = list(csv.DictReader(open(path)))
    assert [(r["run"], r["measure"]) for r in rows] == [(r["run"], r["measure"]) for r in expected]
    for got, want in zip(rows, expected):
        where = (want["run"], want["measure"])
        assert float(got["mean"]) == pytest.approx(want["mean"], abs=1e-12), where
        assert (float(got["ci_low"]), float(got["ci_high"])) == pytest.approx(want["ci"], abs=1e-12), where
        assert float(got["delta"]) == pytest.approx(want["delta"], abs=1e-12), where
        for key in ("p", "p_adjusted"):
            assert float(got[key]) == pytest.approx(want[key], rel=1e-9, nan_ok=True), (where, key)
        assert [int(got[k]) for k in ("wins", "ties", "losses", "turns")] == [
            want[k] for k in ("wins", "ties", "losses", "turns")], where


def test_compare_tables_are_recomputed(runs, compared):
    """The CSV of each of compare's three tables (passages, PTKB, responses): every figure, full precision."""
    out, _ = compared
    per_turn = {n: trec_eval(runs.qrels, runs.rankings[n], TRACK) for n in runs.rankings}
    _check_csv(out / "comparison.csv", _expected_table(per_turn, TRACK))
    per_turn = {n: trec_eval(runs.ptkb_qrels, runs.ptkb[n], PTKB) for n in runs.ptkb}
    _check_csv(out / "ptkb_comparison.csv", _expected_table(per_turn, PTKB))
    per_turn = {n: _rouge(runs.responses[n], runs.references) for n in runs.responses}
    _check_csv(out / "responses_comparison.csv", _expected_table(per_turn, ROUGE))


def test_compare_with_missing_zero_and_wilcoxon(runs):
    """--missing zero: every judged turn, 0 where a run ranks nothing; the Wilcoxon signed-rank test of scipy."""
    from scipy import stats

    from ikatkit.evaluate.compare import compare_runs

    comparison = compare_runs(dict(runs.paths), runs.year / "qrels.txt", measures=list(TRACK), missing="zero",
                              test="wilcoxon")
    per_turn = {n: trec_eval(runs.qrels, runs.rankings[n], TRACK) for n in runs.rankings}
    expected = _expected_table(per_turn, TRACK, "zero", sorted(runs.qrels))
    for got, want in zip(comparison.rows, expected):
        x = np.array([per_turn["manual"].get(q, {}).get(want["measure"], 0.0) for q in sorted(runs.qrels)])
        y = np.array([per_turn[want["run"]].get(q, {}).get(want["measure"], 0.0) for q in sorted(runs.qrels)])
        p = math.nan if not np.any(y - x) else float(stats.wilcoxon(y, x).pvalue)
        assert got["p"] == pytest.approx(p, rel=1e-9, nan_ok=True)
        assert (got["mean"], got["delta"], got["turns"]) == pytest.approx(
            (want["mean"], want["delta"], len(runs.qrels)))


def test_breakdowns_per_turn_position_and_conversation(runs, compared):
    """per_turn.csv and per_conversation.csv: the mean of each group's turns (those both runs rank) and their count."""
    out, _ = compared
    per_turn = {n: trec_eval(runs.qrels, runs.rankings[n], TRACK) for n in runs.rankings}
    common = sorted(set(per_turn["manual"]) & set(per_turn["automatic"]))
    for kind, group in (("per_turn", lambda q: q.rsplit("_", 1)[1]),
                        ("per_conversation", lambda q: q.rsplit("_", 1)[0])):
        rows = list(csv.DictReader(open(out / f"{kind}.csv")))
        assert len(rows) == len({group(q) for q in common}) * len(TRACK)
        for row in rows:
            turns = [q for q in common if group(q) == row[kind.split("_", 1)[1]]]
            assert int(row["judged_turns"]) == len(turns)
            for name in per_turn:
                mean = np.mean([per_turn[name][q][row["measure"]] for q in turns])
                assert float(row[name]) == pytest.approx(mean, abs=5e-5), (kind, row)


def _judged_at(ranking: dict[str, dict[str, float]], qrels: dict, k: int) -> float:
    """The share of each judged turn's top k (fewer when the run ranks fewer) that is judged, averaged."""
    shares = []
    for qid, docs in ranking.items():
        if qid in qrels and docs:
            top = sorted(docs, key=lambda d: -docs[d])[:k]
            shares.append(sum(d in qrels[qid] for d in top) / len(top))
    return float(np.mean(shares))


class _Tables(HTMLParser):
    """The cells of every <table> of a page, and the text of its figure captions."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.captions: list[str] = []
        self._cell: list[str] | None = None
        self._caption: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "figcaption":
            self._caption = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "figcaption" and self._caption is not None:
            self.captions.append("".join(self._caption).strip())
            self._caption = None

    def handle_data(self, data):
        for part in (self._cell, self._caption):
            if part is not None:
                part.append(data)


def test_one_figure_reads_the_same_everywhere(runs, compared, reported):
    """The automatic run's passage nDCG@5 against the manual run: its mean, interval, delta, Holm p-value,
    wins/ties/losses and judged@5, recomputed, in the terminal, the Markdown, the TeX, the CSV and the HTML report."""
    out, printed = compared
    want = next(r for r in _expected_table({n: trec_eval(runs.qrels, runs.rankings[n], TRACK)
                                            for n in runs.rankings}, TRACK)
                if (r["run"], r["measure"]) == ("automatic", "nDCG@5"))
    judged = _judged_at(runs.rankings["automatic"], runs.qrels, 5)
    mean, delta = f"{want['mean']:.4f}", f"{want['delta']:+.4f}"
    ci = f"[{want['ci'][0]:.4f}, {want['ci'][1]:.4f}]"
    wtl = f"{want['wins']}/{want['ties']}/{want['losses']}"
    p = p_text(want["p_adjusted"])
    markdown = (out / "comparison.md").read_text()
    passages = printed.split("PTKB statement ranking")[0]
    mark = "\u2021" if want["p_adjusted"] < 0.01 else "\u2020" if want["p_adjusted"] < 0.05 else ""
    for text in (passages, markdown):  # the compact table: runs x measures, the mark of the corrected p
        lines = [_cells(line) for line in text.splitlines() if line.startswith("|")]
        cells = dict(zip(lines[0], next(line for line in lines if line[0] == "automatic")))
        judged_10 = _judged_at(runs.rankings["automatic"], runs.qrels, 10)
        assert cells["nDCG@5"] == mean + mark and cells["judged@10"] == f"{judged_10:.3f}"
    lines = [_cells(line) for line in markdown.splitlines() if line.startswith("|")]
    long = next(line for line in lines if line[:2] == ["automatic", "nDCG@5"])
    assert long[2:8] == [mean, ci, delta, p, wtl, str(want["turns"])]
    judged_header = next(line for line in lines if line[1:2] == ["judged@5"])
    assert dict(zip(judged_header, next(line for line in lines[lines.index(judged_header):]
                                        if line[0] == "automatic")))["judged@5"] == f"{judged:.3f}"
    tex = next(line for line in (out / "comparison.tex").read_text().splitlines() if line.startswith("automatic &"))
    latex_mark = {"\u2021": r"$^{\ddagger}$", "\u2020": r"$^{\dagger}$", "": ""}[mark]
    assert tex.split(" & ")[1 + list(TRACK).index("nDCG@5")] == mean + latex_mark
    row = next(r for r in csv.DictReader(open(out / "comparison.csv")) if (r["run"], r["measure"]) ==
               ("automatic", "nDCG@5"))
    assert float(row["mean"]) == pytest.approx(want["mean"], abs=1e-12)
    page = _Tables()
    page.feed(reported.read_text())
    table = next(t for t in page.tables if ["automatic", "nDCG@5"] == t[-1][:2] or any(
        r[:2] == ["automatic", "nDCG@5"] for r in t))
    header = table[0]
    cells = dict(zip(header, next(r for r in table if r[:2] == ["automatic", "nDCG@5"])))
    assert cells["mean"].rstrip("*") == mean and cells["95% CI"] == ci
    assert cells["delta"] == delta and cells["p (holm)"] == p
    assert cells["wins/ties/losses"] == wtl and cells["turns"] == str(want["turns"])
    runs_table = page.tables[0]
    automatic = dict(zip(runs_table[0], next(r for r in runs_table if r[0] == "automatic")))
    assert automatic["judged@5"] == f"{judged:.3f}" and automatic["type"] == "automatic"
    assert automatic["judged turns ranked"] == str(len(runs.qrels))


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
PROBE = """<script>
var body = document.body.getBoundingClientRect().right;
var out = [...document.querySelectorAll('table, img')].filter(e => e.getBoundingClientRect().right > body + 1);
var pre = document.createElement('pre'); pre.id = 'probe';
pre.textContent = JSON.stringify({page: document.documentElement.scrollWidth, view: window.innerWidth,
                                  outside: out.map(e => e.tagName + ' ' + e.innerText.slice(0, 40))});
document.body.appendChild(pre);
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium; .ci/run "
                                             "installs it): the report's rendering is not checked")
def test_report_fits_a_1400_pixel_window_in_chromium(reported, tmp_path):
    """The report rendered by headless Chromium at 1400 px: no table or figure reaches past the page's body and
    the page needs no sideways scrolling (the report before issue 38 was 2926 px wide, its table cut at judged@5);
    p-values read ``< 0.001``, never 0.0000, and every caption is words, not a file name."""
    import subprocess

    page = reported.read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                          "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    found = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1)))
    assert found["outside"] == [] and found["page"] <= found["view"], found
    parsed = _Tables()
    parsed.feed(page)
    p_cells = [row[i] for table in parsed.tables for i, head in enumerate(table[0]) if head.startswith("p (")
               for row in table[1:]]
    assert "< 0.001" in p_cells and all(re.fullmatch(r"|< 0\.001|[01]\.\d{3}", c) for c in p_cells), p_cells
    assert len(parsed.captions) == 2 * (len(TRACK) + len(PTKB) + len(ROUGE))
    assert all(re.fullmatch(r"(Passage ranking|PTKB statement ranking|Responses): \S+ per (turn position|"
                            r"conversation)", c) for c in parsed.captions), parsed.captions

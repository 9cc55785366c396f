"""Comparing runs on real data: a reference run against degraded copies made here. The reference is the real
SPLADE run of the 2023 test year (its qrels, its PTKB qrels), then a BM25 run of the manual queries over the embedded
demo collection (its qrels): each test runs on both, the first skipped without ../shared."""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

import ir_measures
import pytest

from ikatkit.cli import main
from ikatkit.evaluate.compare import compare_runs, judged_fractions
from ikatkit.evaluate.ptkb import evaluate_ptkb
from ikatkit.evaluate.qrels import load_qrels
from ikatkit.evaluate.report import write_comparison, write_report
from ikatkit.evaluate.significance import correct, paired_test
from ikatkit.runs.io import read_run, write_run
from ikatkit.runs.model import PassageRef, PtkbRef, Response, Run, TurnResult
from ikatkit.topics import load_topics


@dataclass(frozen=True)
class Data:
    reference: dict[str, dict[str, float]]
    qrels: Path
    ptkb_qrels: Path
    topics: Path

    def judged_turns(self) -> int:
        return len({line.split()[0] for line in self.qrels.read_text().splitlines()} & set(self.reference))


@pytest.fixture(scope="module", params=["ikat2023", "demo"])
def data(request) -> Data:
    if request.param == "demo":
        from ikatkit.retrieve.bm25 import Bm25Searcher

        demo = request.getfixturevalue("demo_dir")
        queries = load_topics(demo / "topics.json").queries("manual")
        hits = Bm25Searcher(request.getfixturevalue("demo_index")).batch_search(queries, 100)
        reference = {q: dict(found) for q, found in hits.items()}
        return Data(reference, demo / "qrels.txt", demo / "ptkb_qrels.txt", demo / "topics.json")
    year = request.getfixturevalue("ikat2023")
    reference = json.loads((year / "reference_run" / "splade_deberta_run.json").read_text())
    return Data(reference, year / "qrels.txt", year / "ptkb_qrels.nist.txt", year / "test_topics.json")


@pytest.fixture(scope="module")
def runs(data):
    reference = data.reference
    rng = random.Random(7)
    reversed_ = {q: {pid: -s for pid, s in docs.items()} for q, docs in reference.items()}
    truncated = {q: dict(sorted(docs.items(), key=lambda i: -i[1])[:3]) for q, docs in reference.items()}
    shuffled = {q: dict(zip(docs, rng.sample(sorted(docs.values()), len(docs)))) for q, docs in reference.items()}
    return {"reference": reference, "copy": dict(reference), "reversed": reversed_, "truncated": truncated,
            "shuffled": shuffled}


def test_significance_and_numbers(runs, data):
    comparison = compare_runs(runs, data.qrels)
    rows = {(r["run"], r["measure"]): r for r in comparison.rows}
    assert rows[("reversed", "nDCG@5")]["p_adjusted"] < 0.05 and rows[("reversed", "nDCG@5")]["delta"] < 0
    assert rows[("shuffled", "nDCG@5")]["p_adjusted"] < 0.05
    assert math.isnan(rows[("copy", "nDCG@5")]["p"])
    assert (rows[("copy", "nDCG@5")]["wins"], rows[("copy", "nDCG@5")]["losses"]) == (0, 0)
    # the top 3 are kept; only score ties at rank 3 (broken by id in trec_eval) can differ
    assert rows[("truncated", "nDCG@3")]["delta"] == pytest.approx(0.0, abs=1e-3)
    qrels = list(ir_measures.read_trec_qrels(str(data.qrels)))
    qrels_dict = load_qrels(data.qrels)
    for name, run in runs.items():  # every number in the table is ir-measures' own aggregate
        direct = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in comparison.measures], qrels, run)
        for measure, value in direct.items():
            assert rows[(name, str(measure))]["mean"] == pytest.approx(value, abs=1e-9), (name, measure)
    # Judged@5 of a run cut to 3 passages counts those 3 (ir-measures divides by the passages returned, at most k)
    assert comparison.judged["truncated"][5] == pytest.approx(judged_fractions(runs["reference"], qrels_dict, (3,))[3])
    assert "| reversed |" in comparison.to_markdown() and r"\begin{tabular}" in comparison.to_latex()


def test_missing_turns_scored_zero(runs, data):
    """A run answering half the turns: compared on the common turns by default, on all judged turns with zero."""
    half = dict(list(runs["reference"].items())[: len(runs["reference"]) // 3])
    pair = {"reference": runs["reference"], "half": half}
    common = {(r["run"], r["measure"]): r for r in compare_runs(pair, data.qrels).rows}
    zero = {(r["run"], r["measure"]): r for r in compare_runs(pair, data.qrels, missing="zero").rows}
    judged = data.judged_turns()
    assert common[("half", "nDCG@5")]["turns"] < judged and common[("half", "nDCG@5")]["losses"] == 0
    assert zero[("half", "nDCG@5")]["turns"] == judged and zero[("half", "nDCG@5")]["losses"] > 0
    assert zero[("half", "nDCG@5")]["delta"] < 0 and zero[("half", "nDCG@5")]["p"] < 0.05


def test_intervals_and_all_pairs(runs, data):
    """95% intervals are Student-t intervals of the per-turn values; all pairs are tested and corrected together."""
    import numpy as np
    from scipy import stats

    names = ("reference", "reversed", "shuffled")
    comparison = compare_runs({n: runs[n] for n in names}, data.qrels, measures=["nDCG@5", "P(rel=2)@20"],
                              all_pairs=True)
    row = next(r for r in comparison.rows if r["run"] == "shuffled" and r["measure"] == "nDCG@5")
    values = np.array([v["nDCG@5"] for v in comparison.results["shuffled"].per_query.values()])
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((values.mean() - half, values.mean() + half), abs=1e-12)
    assert len(comparison.pairs) == 3 * 2  # (reference, reversed), (reference, shuffled), (reversed, shuffled)
    pair = next(p for p in comparison.pairs if (p["run_a"], p["run_b"], p["measure"]) == ("reversed", "shuffled",
                                                                                            "nDCG@5"))
    a, b = comparison.results["reversed"].per_query, comparison.results["shuffled"].per_query
    common = sorted(set(a) & set(b))
    raw = paired_test([a[q]["nDCG@5"] for q in common], [b[q]["nDCG@5"] for q in common])
    assert pair["p"] == pytest.approx(raw) and pair["delta"] == pytest.approx(
        comparison.results["shuffled"].mean["nDCG@5"] - comparison.results["reversed"].mean["nDCG@5"])
    assert [p["p_adjusted"] for p in comparison.pairs] == pytest.approx(correct([p["p"] for p in comparison.pairs]))
    for text, rows in ((comparison.pairs_csv(), comparison.pairs), (comparison.to_csv(), comparison.rows)):
        assert list(csv.DictReader(text.splitlines())) == [{k: str(v) for k, v in r.items()} for r in rows]
    table = comparison.to_markdown(full=True)
    lines = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()
             if line.startswith("|")]
    assert lines[0] == ["run", "nDCG@5", "P(rel=2)@20", "judged@10"] and "All pairs:" in table  # the compact table
    mark = "\u2021" if row["p_adjusted"] < 0.01 else "\u2020" if row["p_adjusted"] < 0.05 else ""
    assert lines[2][:2] == ["reference", f"{comparison.results['reference'].mean['nDCG@5']:.4f}"]  # no mark
    assert next(line for line in lines if line[0] == "shuffled")[1] == f"{row['mean']:.4f}{mark}"
    long = {(line[0], line[1]): line for line in lines if len(line) == 8}  # one row per run and measure
    assert long[("reference", "nDCG@5")][4:6] == ["", ""]  # no delta, no p against itself
    assert long[("shuffled", "nDCG@5")][4] == f"{row['delta']:+.4f}"


def test_tests_and_corrections():
    a, b = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.3, 0.5, 0.4, 0.6, 0.9, 0.8]
    for test in ("ttest", "wilcoxon", "randomization"):
        assert 0 < paired_test(a, b, test) < 0.1
    assert math.isnan(paired_test(a, a))
    assert correct([0.01, 0.04, math.nan, 0.03], "holm") == pytest.approx([0.03, 0.06, math.nan, 0.06], nan_ok=True)
    assert correct([0.01, 0.5], "bonferroni") == [0.02, 1.0]


def test_randomization_test_is_the_exact_sign_flip_test_on_small_samples():
    """scipy's permutation_test flips the signs of the paired differences; with 2^n <= the resamples it enumerates
    them all, so its p-value is the count of flips whose |mean| reaches the observed one, over 2^n."""
    import itertools

    import numpy as np

    rng = random.Random(3)
    a = [rng.random() for _ in range(10)]
    b = [x + rng.gauss(0.3, 0.2) for x in a]
    diff = np.subtract(b, a)
    flips = [abs(np.mean(np.multiply(signs, diff))) for signs in itertools.product((-1, 1), repeat=len(diff))]
    expected = sum(f >= abs(diff.mean()) * (1 - 1e-12) for f in flips) / len(flips)
    assert paired_test(a, b, "randomization") == pytest.approx(expected, abs=1e-12) and expected < 0.1


def test_judged_fractions_are_ir_measures_judged_as_we_counted_them(runs, data):
    """Judged@k of ir-measures equals the fraction of the top k (ties by id) with a judgement, averaged over the
    judged turns the run answers, also with many tied scores; a run shorter than k is divided by its length."""
    qrels = load_qrels(data.qrels)
    for name in ("reference", "truncated"):
        run = {q: {pid: round(s) for pid, s in docs.items()} for q, docs in runs[name].items()}
        for k, value in judged_fractions(run, qrels).items():
            top = {q: sorted(docs.items(), key=lambda item: (-item[1], item[0]))[:k] for q, docs in run.items()
                   if q in qrels and docs}
            counted = sum(sum(pid in qrels[q] for pid, _ in t) / len(t) for q, t in top.items()) / len(top)
            assert value == pytest.approx(counted, abs=1e-12)


def test_equal_runs_both_show_in_the_per_turn_plot(runs, data, tmp_path):
    """Two runs of equal values: the second run's line and markers do not hide the first's (offset, another
    shape): each run's colour covers about as many pixels of the per-turn-position plot as the other's."""
    import matplotlib.image
    import numpy as np

    files = write_comparison(compare_runs({"first": runs["reference"], "second": runs["reference"]}, data.qrels,
                                          measures=["nDCG@5"]), tmp_path / "cmp")
    image = matplotlib.image.imread(next(p for p in files["plots"] if p.name == "nDCG_5_per_turn.png"))[..., :3]
    colours = {"first": (0x1f, 0x77, 0xb4), "second": (0xff, 0x7f, 0x0e)}  # matplotlib's C0 and C1
    pixels = {name: int((np.abs(image - np.array(rgb) / 255).max(axis=2) < 0.05).sum())
              for name, rgb in colours.items()}
    assert pixels["first"] > 0.5 * pixels["second"] > 50, pixels


def test_plots_and_report(runs, data, tmp_path):
    subset = {k: runs[k] for k in ("reference", "reversed")}
    files = write_comparison(compare_runs(subset, data.qrels), tmp_path / "cmp")
    for path in files["plots"]:
        png = path.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert len(files["plots"]) == 2 * 6  # per turn position and per conversation, for each of the 6 measures
    per_turn = list(csv.DictReader(files["per_turn"].read_text().splitlines()))
    assert list(per_turn[0]) == ["turn", "judged_turns", "measure", "reference", "reversed"]
    first = [r for r in per_turn if r["turn"] == "1" and r["measure"] == "nDCG@5"]
    qrels_turns = {line.split()[0] for line in data.qrels.read_text().splitlines()}
    assert int(first[0]["judged_turns"]) == sum(q.endswith("_1") for q in qrels_turns)
    report = write_report(subset, data.qrels, tmp_path / "report").read_text()
    assert report.count("data:image/png;base64,") == 12 and "<td>reversed</td>" in report
    assert f"<td>{data.judged_turns()}</td><td>0</td>" in report and f"qrels: {data.qrels}" in report


def _official(ranking: dict[str, dict[str, float]], topics, ptkb_order) -> Run:
    """A 2023 run with ``ranking``'s passages and each turn's PTKB provenance in the order ``ptkb_order`` gives."""
    run = Run("cli-test", "automatic")
    for turn in topics:
        passages = [PassageRef(pid, s) for pid, s in sorted(ranking.get(turn.qid, {}).items(), key=lambda i: -i[1])]
        ptkb = topics.conversation_of(turn.qid).ptkb
        keys = ptkb_order(list(turn.ptkb_provenance), [k for k in ptkb if k not in turn.ptkb_provenance])
        refs = [PtkbRef(k, float(len(keys) - i), ptkb[k]) for i, k in enumerate(keys)]
        run.turns.append(TurnResult(turn.qid, [Response(1, "a response", passages, refs)]))
    return run


def test_compare_and_report_commands_with_ptkb(runs, data, tmp_path, capsys):
    topics = load_topics(data.topics)
    paths = {}
    for name, ranking, order in (("manual", runs["reference"], lambda gold, other: gold + other[:2]),
                                 ("automatic", runs["shuffled"], lambda gold, other: other[:2] + gold[::-1])):
        paths[name] = tmp_path / f"{name}.json"
        write_run(_official(ranking, topics, order), paths[name], "2023")
    common = [f"manual={paths['manual']}", f"automatic={paths['automatic']}", "--qrels", str(data.qrels),
              "--ptkb-qrels", str(data.ptkb_qrels), "--test", "wilcoxon", "--correction", "bonferroni"]
    assert main(["compare", *common, "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "| automatic |" in printed and "PTKB statement ranking" in printed and "wilcoxon, bonferroni" in printed
    rows = {(r["run"], r["measure"]): r for r in csv.DictReader(open(tmp_path / "cmp" / "ptkb_comparison.csv"))}
    assert float(rows[("automatic", "nDCG@5")]["p_adjusted"]) < 0.05
    assert float(rows[("automatic", "nDCG@5")]["mean"]) < float(rows[("manual", "nDCG@5")]["mean"]) == pytest.approx(
        evaluate_ptkb(read_run(paths["manual"]), data.ptkb_qrels).mean["nDCG@5"])
    names = {p.name for p in (tmp_path / "cmp").iterdir()}
    assert {"comparison.tex", "per_conversation.csv", "ptkb_per_turn.csv", "nDCG_5_per_turn.png",
            "ptkb_nDCG_5_per_conversation.png"} <= names
    assert main(["report", *common, "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    # the runs; per comparison the compact table and one row per run and measure
    assert page.count("data:image/png;base64,") == 2 * 6 + 2 * 4 and page.count("<table>") == 1 + 2 + 2
    assert "PTKB statement ranking" in page and "<td>automatic</td>" in page
    assert main(["compare", *common, "--baseline", "nobody"]) == 2
    assert "baseline 'nobody' is not among the runs" in capsys.readouterr().err


def _ptkb_run(topics, name: str, order) -> Run:
    """A 2023 run: each turn's passages its provenance, its PTKB provenance the keys ``order(turn, ptkb)`` gives."""
    turns = []
    for turn in topics:
        ptkb = topics.conversation_of(turn.qid).ptkb
        keys = order(turn, list(ptkb))
        passages = [PassageRef(pid, 10.0 - i) for i, pid in enumerate(dict.fromkeys(turn.response_provenance))]
        refs = [PtkbRef(k, 1.0 - 0.01 * i, ptkb[k]) for i, k in enumerate(keys)]
        turns.append(TurnResult(turn.qid, [Response(1, "a response", passages or [PassageRef("x:0", 1.0)], refs)]))
    return Run(name, "automatic" if name == "automatic" else "manual", turns, 2023, "uva")


def test_compare_delta_test_and_wins_are_about_the_same_turns(ikat2023, tmp_path, capsys):
    """Issue 38: a manual run copying the gold PTKB (empty on 59 of the 98 NIST-judged turns) against an automatic
    run ranking the whole PTKB every turn. With --missing skip every figure of the PTKB table is over the 39 turns
    both rank; with --missing zero over all 98: the delta is the mean paired difference of the turns the test and
    the wins/ties/losses count, recomputed here with pytrec_eval, and the legend says how many turns each run ranks."""
    import numpy as np
    import pytrec_eval
    from scipy import stats

    topics = load_topics(ikat2023 / "test_topics.json")
    manual = _ptkb_run(topics, "manual", lambda turn, keys: list(turn.ptkb_provenance))
    automatic = _ptkb_run(topics, "automatic", lambda turn, keys: keys[::-1])
    paths = {}
    for run in (manual, automatic):
        paths[run.run_name] = tmp_path / f"{run.run_name}.json"
        write_run(run, paths[run.run_name], "2023")
    qrels = load_qrels(ikat2023 / "ptkb_qrels.nist.txt")
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5"})
    scores = {}
    for run in (manual, automatic):
        ranked = {t.turn_id: {p.key: p.score for p in t.responses[0].ptkb} for t in run.turns
                  if t.turn_id in qrels and t.responses[0].ptkb}
        scores[run.run_name] = {q: v["ndcg_cut_5"] for q, v in evaluator.evaluate(ranked).items()}
    assert (len(scores["manual"]), len(scores["automatic"]), len(qrels)) == (39, 98, 98)
    for missing in ("skip", "zero"):
        turns = sorted(scores["manual"]) if missing == "skip" else sorted(qrels)
        x = np.array([scores["manual"].get(q, 0.0) for q in turns])
        y = np.array([scores["automatic"].get(q, 0.0) for q in turns])
        out = tmp_path / missing
        assert main(["compare", *(f"{n}={p}" for n, p in paths.items()), "--qrels", str(ikat2023 / "qrels.txt"),
                     "--ptkb-qrels", str(ikat2023 / "ptkb_qrels.nist.txt"), "--missing", missing,
                     "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        rows = {(r["run"], r["measure"]): r for r in csv.DictReader(open(out / "ptkb_comparison.csv"))}
        row = rows[("automatic", "nDCG@5")]
        assert float(row["delta"]) == pytest.approx((y - x).mean(), abs=1e-12)
        assert float(rows[("manual", "nDCG@5")]["mean"]) == pytest.approx(x.mean(), abs=1e-12)
        assert float(row["mean"]) == pytest.approx(y.mean(), abs=1e-12)
        assert float(row["p"]) == pytest.approx(stats.ttest_rel(y, x).pvalue, rel=1e-9)
        assert (int(row["wins"]), int(row["ties"]), int(row["losses"])) == (
            int((y > x).sum()), int((y == x).sum()), int((y < x).sum()))
        assert int(row["turns"]) == len(turns)
        legend = printed.split("PTKB statement ranking")[1]
        assert f"over the {len(turns)} judged turns" in legend
        assert "manual ranks 39 of the 98 judged turns (59 unranked)" in legend
        assert "automatic ranks 98 of the 98 judged turns (0 unranked)" in legend


def test_compare_names_a_run_without_ptkb_and_keeps_the_passage_tables(ikat2023, tmp_path, capsys):
    """A run with no PTKB provenance at all is left out of the PTKB table only, named there."""
    topics = load_topics(ikat2023 / "test_topics.json")
    paths = {}
    for run in (_ptkb_run(topics, "manual", lambda turn, keys: list(turn.ptkb_provenance)),
                _ptkb_run(topics, "bare", lambda turn, keys: [])):
        paths[run.run_name] = tmp_path / f"{run.run_name}.json"
        write_run(run, paths[run.run_name], "2023")
    assert main(["compare", *(f"{n}={p}" for n, p in paths.items()), "--qrels", str(ikat2023 / "qrels.txt"),
                 "--ptkb-qrels", str(ikat2023 / "ptkb_qrels.nist.txt")]) == 0
    printed = capsys.readouterr().out
    passages, ptkb = printed.split("PTKB statement ranking")
    assert "| bare |" in passages and "| manual |" in passages
    assert "| bare |" not in ptkb and "| manual |" in ptkb
    assert "bare: no PTKB provenance on any of the 98 judged turns (left out of this table)" in ptkb

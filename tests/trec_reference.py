"""Reference figures for the demo's runs from pytrec_eval (trec_eval's code) on the written files, read here with
``str.split``: independent of ikatkit's readers, writers and evaluation."""

from __future__ import annotations

from pathlib import Path


def trec_eval_ndcg5(run_file: Path, qrels_file: Path) -> float:
    """nDCG@5 of a TREC run file by pytrec_eval (trec_eval's code), both files read here with str.split: a
    reference independent of ikatkit's readers, writers and evaluation."""
    import pytrec_eval

    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_file.read_text(encoding="utf-8").splitlines():
        qid, _, pid, grade = line.split()
        qrels.setdefault(qid, {})[pid] = int(grade)
    run: dict[str, dict[str, float]] = {}
    for line in run_file.read_text(encoding="utf-8").splitlines():
        qid, _, pid, _, score, _ = line.split()
        run.setdefault(qid, {})[pid] = float(score)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5"}).evaluate(run)
    return sum(v["ndcg_cut_5"] for v in per_query.values()) / len(per_query)

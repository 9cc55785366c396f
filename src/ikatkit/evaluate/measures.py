"""Measures as declared data, named as ir-measures names them (relevance level explicit)."""

from __future__ import annotations

import ir_measures

# The track's headline measures: graded nDCG, binary measures at grade >= 2.
TRACK_MEASURES = ("nDCG@3", "nDCG@5", "nDCG@1000", "P(rel=2)@20", "R(rel=2)@20", "AP(rel=2)")

# PTKB statements are judged 0/1.
PTKB_MEASURES = ("nDCG@5", "P@5", "R@5", "AP")

# trec_eval names used in published iKAT results -> ir-measures names. ``mrr_1000`` is the uncut RR:
# pytrec_eval's RR@1000 breaks score ties differently from trec_eval's recip_rank.
TREC_EVAL_NAMES = {
    **{f"ndcg_cut_{k}": f"nDCG@{k}" for k in (3, 5, 10, 15, 20, 30, 100, 200, 500, 1000)},
    **{f"recall_{k}": f"R(rel=2)@{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)},
    **{f"P_{k}": f"P(rel=2)@{k}" for k in (5, 10, 20)},
    "mrr_10": "RR(rel=2)", "mrr_1000": "RR(rel=2)", "map": "AP(rel=2)",  # mrr_10: cut first (TREC_EVAL_CUTS)
}

# ``mrr_N`` is no trec_eval measure: published iKAT figures compute it as trec_eval's recip_rank over the run cut
# at N in its own rank order, so a tie across rank N does not pull a lower-ranked passage in (ir-measures'
# RR@N sorts ties by ascending id, recip_rank by descending id). The other trec_eval
# names cut as trec_eval does (sort by score, ties by id, then cut): the reference run's published ndcg_cut_20
# reproduces only that way. ir-measures names keep ir-measures semantics.
TREC_EVAL_CUTS = {"mrr_10": 10}


def parse_measures(names: tuple[str, ...] | list[str]) -> list:
    """ir-measures objects for names in ir-measures syntax or trec_eval names from the table above."""
    from ikatkit.errors import IkatError

    parsed = []
    for name in names:
        try:
            parsed.append(ir_measures.parse_measure(TREC_EVAL_NAMES.get(name, name)))
        except (ValueError, NameError, SyntaxError, TypeError) as err:
            raise IkatError(f"unknown measure {name!r} ({err})", fix="use ir-measures syntax, e.g. 'nDCG@10'") from None
    return parsed

"""Measures as declared data, named as ir-measures names them (relevance level explicit)."""

from __future__ import annotations

import logging

import ir_measures

log = logging.getLogger(__name__)

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


def shown(name: str) -> str:
    """How a measure asked as ``name`` is printed: a trec_eval name with the ir-measures measure it stands for, its
    relevance level explicit (``map (AP(rel=2))``, ``P_20 (P(rel=2)@20)``), so that it is not compared with ``AP`` or
    ``P@20`` (rel >= 1) by accident; any other name as asked."""
    meant = TREC_EVAL_NAMES.get(name)
    if meant is None:
        return name
    cut = TREC_EVAL_CUTS.get(name)
    return f"{name} ({meant} of the top {cut} as ranked)" if cut else f"{name} ({meant})"


MRR_NOTE = ("{name!r} is ir-measures' RR at rel >= 1 (a passage graded 1 counts as relevant); iKAT reports "
            "reciprocal rank at rel >= 2 (mrr_10 in published results): pass 'RR(rel=2)' for that (0/1 PTKB qrels "
            "give the same either way)")


def parse_measures(names: tuple[str, ...] | list[str]) -> list:
    """ir-measures objects for names in ir-measures syntax or trec_eval names from the table above; an unknown
    name is one error suggesting the close ones (``ndcg@3`` -> ``nDCG@3``); ``MRR`` (rel >= 1) is parsed with a
    warning naming ``RR(rel=2)``, iKAT's."""
    from ikatkit.errors import IkatError

    parsed = []
    for name in names:
        try:
            parsed.append(ir_measures.parse_measure(TREC_EVAL_NAMES.get(name, name)))
        except (ValueError, NameError, SyntaxError, TypeError) as err:
            raise IkatError(f"unknown measure {name!r} ({err})",
                            fix=suggest_measure(name, "use ir-measures syntax, e.g. 'nDCG@10'")) from None
        if name.upper().startswith("MRR") and "rel=" not in name and name not in TREC_EVAL_NAMES:
            log.warning(MRR_NOTE.format(name=name))
    return parsed


def suggest_measure(name: str, fix: str) -> str:
    """``fix`` led by "did you mean ...?" for a measure whose name (before ``@`` or ``(``) is close to one that
    ir-measures or the trec_eval table knows, case ignored: ``nDGC@3`` -> ``nDCG@3``."""
    from ikatkit.suggest import did_you_mean

    cut = min((i for i in (name.find("@"), name.find("(")) if i >= 0), default=len(name))
    head, tail = name[:cut], name[cut:]
    known: dict[str, str] = {}
    for measure in ["nDCG", "P", "R", "AP", "RR", *ir_measures.measures.registry, *TREC_EVAL_NAMES]:
        if measure.isascii():  # not α_nDCG, a spelling of alpha_nDCG
            known.setdefault(measure.lower(), measure)  # nDCG before its alias NDCG
    if head.lower() in known:  # only the case differs, or the name is right and the rest is not
        meant = known[head.lower()] + tail
        return f"did you mean {meant!r}? {fix}" if meant != name else fix
    return did_you_mean(head.lower(), known, fix, show=lambda m: known[m] + tail)

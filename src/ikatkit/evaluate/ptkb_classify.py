"""PTKB provenance as classification (the 2025 guidelines): per turn, the statements a run cites against graded
PTKB qrels at a stated relevance grade, as precision, recall and F1.

- Statement texts (2025 runs cite texts) map to the topics' keys exactly, then after :func:`normalise_statement`;
  a statement that maps to no key of its conversation is counted (``info["unmapped"]``), never dropped silently.
- The released 2025 qrels name statements ``ptkb-<conversation>-<i>``, ``i`` the 0-based index into the topic's
  ``ptkb`` list; ikatkit keys 2025 statements by 1-based position, so ``i`` becomes ``str(i + 1)``
  (:func:`ptkb_qrels_keys`). 2023/2024 qrels (keys, grades 0/1) are read as they are.
- Per turn: ``SetP`` = relevant cited / cited, ``SetR`` = relevant cited / relevant, ``SetF`` their harmonic mean,
  each 0 where undefined (nothing cited, nothing relevant): scikit-learn's ``zero_division=0``. The ``SetX(rel=N)``
  means are over judged turns (ir-measures' names: relevant = grade >= N); ``P_micro``, ``R_micro``, ``F1_micro``
  pool every judged turn's statements. A cited statement without a judgement counts as not relevant (trec_eval's
  rule) and is counted in ``info["cited_unjudged"]``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from ikatkit.errors import IkatError
from ikatkit.evaluate.evaluate import EvalResult
from ikatkit.evaluate.qrels import Qrels
from ikatkit.runs.model import Run
from ikatkit.topics import Topics, split_query_id

QREL_KEY = re.compile(r"^ptkb-(?P<conversation>.+)-(?P<index>\d+)$")
Cited = dict[str, list[str]]  # {qid: [ptkb key, ...]}


def normalise_statement(text: str) -> str:
    """A statement's text for the second, lenient match: Unicode NFKC, case-folded, whitespace collapsed, outer
    spaces and punctuation (``;`` ``.`` ``,`` quotes) stripped."""
    text = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return text.strip(" ;.,:!?\"'\u2018\u2019\u201c\u201d")


def ptkb_qrels_keys(qrels: Qrels) -> Qrels:
    """PTKB qrels keyed as ikatkit keys statements: the released 2025 ``ptkb-<conversation>-<i>`` becomes
    ``str(i + 1)``; other keys (2023/2024) stay. A 2025 key of another conversation than its turn's is an error."""
    keyed: Qrels = {}
    for qid, judged in qrels.items():
        conversation = split_query_id(qid)[0]
        keyed[qid] = {}
        for key, grade in judged.items():
            match = QREL_KEY.match(key)
            if match:
                if match["conversation"] != conversation:
                    raise IkatError(f"PTKB qrels key {key} of turn {qid} names conversation {match['conversation']}",
                                    fix="PTKB qrels keys look like ptkb-<the turn's conversation>-<index>")
                key = str(int(match["index"]) + 1)
            keyed[qid][key] = grade
    return keyed


def check_run_fits_ptkb_qrels(run: Run, fmt: str, qrels: Qrels, topics_year: int | None = None) -> None:
    """One error where ``run`` (read as format ``fmt``) cannot be scored against these PTKB qrels: an interactive
    run (its turn ids are the simulated user's turns, not the offline turns the qrels judge), or a run of another
    year than the qrels (2025 qrels name statements ``ptkb-<conversation>-<i>``, 2023/2024 ones by key). The year
    is the topics' (``topics_year``: a run may answer 2023 topics in the 2025 format), else the format's."""
    if fmt in ("interactive", "2025-interactive") or any(t.user is not None for t in run.turns):
        raise IkatError(f"run {run.run_name!r} is interactive: its turn ids are the simulated user's turns, not "
                        "the offline turns these PTKB qrels judge", where="eval-ptkb",
                        fix="score an offline run against PTKB qrels; an interactive run is scored by its rubrics: "
                            "ikatkit eval-responses RUN --rubrics rubrics.json")
    keys = sorted({key for judged in qrels.values() for key in judged})
    year = str(topics_year) if topics_year else fmt
    if not keys or year not in ("2023", "2024", "2025"):
        return  # a TREC run or {qid: {key: score}} says no year
    if year != "2025" and all(QREL_KEY.match(key) for key in keys):
        raise IkatError(f"these are 2025 PTKB qrels (statement ids such as {keys[0]!r}) and the run is a {year} run",
                        where="--qrels", fix=f"pass the PTKB qrels of {year} (e.g. 2023 ptkb_qrels.nist.txt)")
    if year == "2025" and all(key.isdigit() for key in keys):
        raise IkatError(f"these are 2023/2024 PTKB qrels (statement keys such as {keys[0]!r}) and the run is a "
                        "2025 run", where="--qrels",
                        fix="pass the 2025 PTKB qrels (qrels-ptkb-nist.trec, ids ptkb-<conversation>-<i>)")


def cited_statements(run: Run | Mapping[str, Mapping[str, float]],
                     topics: Topics | None = None) -> tuple[Cited, dict[str, object]]:
    """``({qid: [key, ...]}, counts)``: the statements each turn's first response cites (or every key of a
    ``{qid: {ptkb_key: score}}`` mapping), texts mapped to keys through ``topics``. ``counts``: statements mapped
    ``exact``, ``normalised`` and ``by_key``, and ``unmapped`` with up to five examples."""
    if not isinstance(run, Run):
        return {qid: list(scores) for qid, scores in run.items()}, {"by_key": sum(len(s) for s in run.values())}
    counts: dict[str, int] = {"exact": 0, "normalised": 0, "by_key": 0, "unmapped": 0}
    examples: list[str] = []
    cited: Cited = {}
    for turn in run.turns:
        responses = sorted(turn.responses, key=lambda r: r.rank)
        keys: list[str] = []
        for ref in responses[0].ptkb if responses else []:
            key, how = _map_statement(ref.key, ref.text, turn.turn_id, topics)
            counts[how] += 1
            if key is None:
                if len(examples) < 5:
                    examples.append(f"{turn.turn_id}: {ref.text or ref.key!r}")
            elif key not in keys:
                keys.append(key)
        cited[turn.turn_id] = keys
    return cited, {**counts, "unmapped_examples": examples}


def _map_statement(key: str, text: str, qid: str, topics: Topics | None) -> tuple[str | None, str]:
    if topics is None:
        if not key:
            raise IkatError(f"turn {qid} cites a PTKB statement by its text only", where=f"turn {qid}",
                            fix="pass the topics (--topics) to map statement texts to keys")
        return key, "by_key"
    try:
        ptkb = topics.conversation_of(qid).ptkb
    except KeyError:
        return None, "unmapped"
    if text:
        for found, statement in ptkb.items():
            if statement == text:
                return found, "exact"
        wanted = normalise_statement(text)
        for found, statement in ptkb.items():
            if normalise_statement(statement) == wanted:
                return found, "normalised"
    if key in ptkb:  # a 2023/2024 key whose text is absent or differs from the topics'
        return key, "by_key"
    return None, "unmapped"


def turn_scores(cited: list[str], judged: Mapping[str, int], rel: int) -> dict[str, float]:
    """One turn's ``tp``, ``cited``, ``relevant`` and its P, R and F1 (0 where undefined)."""
    relevant = {key for key, grade in judged.items() if grade >= rel}
    chosen = set(cited)
    tp = len(chosen & relevant)
    precision = tp / len(chosen) if chosen else 0.0
    recall = tp / len(relevant) if relevant else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"tp": tp, "cited": len(chosen), "relevant": len(relevant), "P": precision, "R": recall, "F1": f1}


def classify_ptkb(run: Run | Mapping[str, Mapping[str, float]], qrels: Qrels, rel: int = 1,
                  topics: Topics | None = None, missing: str = "skip") -> EvalResult:
    """P/R/F1 of the cited statements against ``qrels`` at grade ``rel`` (see the module's docstring).

    Judged turns the run lacks are left out (``missing="skip"``) or count as citing nothing (``"zero"``)."""
    if rel < 1:
        raise IkatError(f"relevance grade {rel} makes every judged statement relevant", where="--rel",
                        fix="use --rel 1 or higher (1 for the binary 2023/2024 qrels; 2025 grades are 0-4)")
    cited, counts = cited_statements(run, topics)
    keyed = ptkb_qrels_keys(qrels)
    evaluated = [qid for qid in keyed if qid in cited]
    lacking = [qid for qid in keyed if qid not in cited]
    if not evaluated:
        raise IkatError(f"the run has no turn among the {len(keyed)} judged turns",
                        fix="check that the run and the PTKB qrels are of the same year")
    scored = evaluated + (lacking if missing == "zero" else [])
    rows = {qid: turn_scores(cited.get(qid, []), keyed[qid], rel) for qid in scored}
    names = {"P": f"SetP(rel={rel})", "R": f"SetR(rel={rel})", "F1": f"SetF(rel={rel})"}
    per_query = {qid: {names[m]: row[m] for m in names} for qid, row in rows.items()}
    mean = {name: sum(v[name] for v in per_query.values()) / len(per_query) for name in names.values()}
    tp, n_cited, n_relevant = (sum(row[k] for row in rows.values()) for k in ("tp", "cited", "relevant"))
    precision = tp / n_cited if n_cited else 0.0
    recall = tp / n_relevant if n_relevant else 0.0
    mean[f"P_micro(rel={rel})"] = precision
    mean[f"R_micro(rel={rel})"] = recall
    mean[f"F1_micro(rel={rel})"] = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    unjudged = sum(1 for qid in scored for key in cited.get(qid, []) if key not in keyed[qid])
    info = {"rel": rel, "statements": counts, "cited_unjudged": unjudged, "cited": int(n_cited),
            "relevant": int(n_relevant), "turns_without_relevant": sum(1 for r in rows.values() if not r["relevant"]),
            "turns_citing_nothing": sum(1 for r in rows.values() if not r["cited"])}
    return EvalResult(mean, per_query, evaluated, lacking, info)

"""``build_viewer``: read the runs and the judgements named by paths, then write the viewer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.viewer.data import Judgements, RunData, read_run_data
from ikatkit.viewer.render import write_viewer


def build_viewer(runs: Sequence[str], out: Path, *, topics: str | None = None, qrels: str | None = None,
                 ptkb_qrels: str | None = None, measures: Sequence[str] | None = None, index: str | None = None,
                 passages: Sequence[str] | None = None, rubrics: str | None = None,
                 assessments: Sequence[str] | None = None, forms: Sequence[str] | None = None,
                 judged: str | None = None, user_types: str | None = None) -> Path:
    """The viewer of ``runs`` (paths, ``NAME=PATH`` names one) in ``out``; returns its ``index.html``."""
    if out.exists() and not out.is_dir():
        raise IkatError("--out is a file, not a folder", path=out, fix="name a folder for the viewer's pages")
    from ikatkit.evaluate.qrels import load_qrels, load_rubric_qrels, qrels_columns
    from ikatkit.runs.io import named_path
    from ikatkit.topics import load_topics

    rubric_qrels = qrels is not None and qrels_columns(qrels) == 3  # rubric_id doc:passage rel (2026)
    if rubric_qrels and not rubrics:
        raise IkatError("rubric-based qrels (rubric_id doc:passage rel) grade each turn by the rubric its user "
                        "pursued: they need the rubrics", where="--qrels",
                        fix="pass --rubrics (rubrics.json, rubrics.csv or the topics file)")
    judgements = Judgements(topics=load_topics(topics) if topics else None,
                            qrels=(load_rubric_qrels if rubric_qrels else load_qrels)(qrels) if qrels else None,
                            ptkb_qrels=load_qrels(ptkb_qrels) if ptkb_qrels else None, rubric_qrels=rubric_qrels)
    if measures:
        from ikatkit.evaluate.measures import parse_measures

        parse_measures(list(measures))  # an unknown name: one error before anything is read
        judgements.measures = list(measures)
    if index or passages:
        from ikatkit.index.texts import passage_texts

        judgements.texts = passage_texts(passages or (), index, why="the viewer's passage texts")
    if user_types:
        from ikatkit.evaluate.user_types import read_user_types

        judgements.user_types = read_user_types(user_types)
    if rubrics:
        from ikatkit.evaluate.responses.rubrics import read_rubrics

        judgements.rubrics = read_rubrics(rubrics)
    if judged and not assessments:
        raise IkatError("--judged labels are shown beside NIST's: pass --assessments too", where="--judged",
                        fix="add --assessments (topic*.final) and --forms")
    if assessments:
        if not forms:
            raise IkatError("--assessments need the assessors' forms", where="--assessments",
                            fix="pass --forms guidelines/ (ikat-dialog-v1.json, ikat-fragment-v1.json)")
        from ikatkit.evaluate.assessments import read_assessments, read_forms

        judgements.assessments = read_assessments(list(assessments), read_forms(list(forms)))
        if judged:
            from ikatkit.evaluate.dialogue_judge import read_judged

            judgements.judged, judgements.judge = read_judged(judged, judgements.assessments), judged
    data: list[RunData] = []
    for item in runs:
        name, path = named_path(item)
        data.append(read_run_data(name or Path(path).stem, Path(path), judgements.topics))
    names = [d.name for d in data]
    if len(set(names)) < len(names):
        raise IkatError(f"two runs are named alike: {names}", fix="name them: NAME=PATH")
    return write_viewer(data, judgements, out)

"""The classify_ptkb stage's trained classifier: trained on a few 2023 train conversations (the full training and
the table are documented commands: docs/ptkb-classification.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.evaluate.ptkb_classify import classify_ptkb
from ikatkit.pipelines import load_config
from ikatkit.stages.ptkb_classifier import PtkbClassifier, features, ranked_turns, train_classifier
from ikatkit.pipelines.record import records_for
from ikatkit.stages.core import ClassifyPtkb
from ikatkit.topics import load_topics


@pytest.fixture(scope="module")
def trained(ikat2023: Path, tmp_path_factory) -> tuple[PtkbClassifier, Path, object]:
    from ikatkit.rank import make_ranker

    topics = load_topics(ikat2023 / "train_topics.json")
    labelled = [c.id for c in topics.conversations if any(t.ptkb_provenance for t in c.turns)][:4]
    subset = topics.subset(labelled)
    ranker = make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path_factory.mktemp("emb"))
    classifier = train_classifier(subset, subset.queries("manual"), ranker, "bi-encoder", "bundled:minilm", folds=2)
    path = tmp_path_factory.mktemp("clf") / "ptkb.json"
    classifier.save(path)
    return classifier, path, (subset, ranker)


def test_trained_classifier_beats_citing_all_on_its_topics(trained) -> None:
    classifier, path, (subset, ranker) = trained
    assert PtkbClassifier.load(path) == classifier
    assert 0 < classifier.threshold < 1 and classifier.trained_on["folds"] == 2
    ranked = ranked_turns(subset, subset.queries("manual"), ranker)
    # the logistic model by hand, for one turn: sigmoid(intercept + coef . features)
    qid, items = next(iter(ranked.items()))
    row = features(items)[0]
    assert row == [items[0][1], 0.0, 1.0]
    z = classifier.intercept + sum(w * x for w, x in zip(classifier.coef, row))
    assert classifier.probabilities(items)[0] == pytest.approx(1 / (1 + math.exp(-z)))
    qrels = subset.ptkb_qrels()
    chosen = classify_ptkb({q: dict(classifier.choose(items)) for q, items in ranked.items()}, qrels, 1, subset)
    everything = classify_ptkb({q: dict(items) for q, items in ranked.items()}, qrels, 1, subset)
    assert chosen.mean["F1_micro(rel=1)"] > everything.mean["F1_micro(rel=1)"]


def test_stage_chooses_with_the_classifier(trained, tmp_path: Path) -> None:
    classifier, path, (subset, ranker) = trained
    records = records_for(subset)[:6]
    for record in records:
        record.query = record.resolved_utterance or record.utterance
    out = ClassifyPtkb(ranker=ranker, classifier=str(path)).transform(records)
    for record in out:
        expected = classifier.choose(ranked_turns(subset, subset.queries("manual"), ranker)[record.qid])
        assert record.ptkb == expected
    head = 'name = "c"\nrun_type = "manual"\n[resources.enc]\nkind = "cross-encoder"\nmodel = "x"\n'
    config = tmp_path / "c.toml"
    config.write_text(head + f'[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "classify_ptkb"\n'
                             f'classifier = "{path}"\n')
    with pytest.raises(IkatError, match="trained on a bi-encoder"):
        load_config(config)
    config.write_text(head.replace("cross-encoder", "llm") + '[[stages]]\nstage = "classify_ptkb"\n'
                      f'classifier = "{tmp_path / "absent.json"}"\n')
    with pytest.raises(IkatError, match="PTKB classifier file not found"):
        load_config(config)

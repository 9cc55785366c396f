"""MiniLM fine-tuned on the PTKB labels (ikatkit.rank.ptkb_finetune) and the classifier that reads its score:
real training on real 2023 train pairs, kept tiny (one epoch, two conversations); the full training and its
figures are documented commands (docs/ptkb-classification.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ikatkit.digest import tree_digest
from ikatkit.errors import IkatError
from ikatkit.pipelines.fingerprint import fingerprint_parts
from ikatkit.pipelines.record import records_for
from ikatkit.rank.base import RankerBase
from ikatkit.rank.ptkb_finetune import FineTuned, turn_text
from ikatkit.rank.ptkb_model import (ALL_FEATURES, PtkbModel, cv_folds, files_of, finetuned_pairs, topic_turns,
                                     train_model, training_data)
from ikatkit.stages.core import ClassifyPtkb
from ikatkit.topics import load_topics


@pytest.fixture(scope="module")
def two_conversations(labelled_train) -> Path:
    """The first two labelled conversations of the 2023 train topics."""
    return labelled_train(2)


@pytest.fixture(scope="module")
def labelled_pairs(two_conversations: Path) -> tuple[list[tuple[str, str]], list[int]]:
    """The first 24 labelled (turn text, statement) pairs, with their labels (a few relevant)."""
    topics = load_topics(two_conversations)
    turns = topic_turns(topics, topics.queries("raw"))
    pairs, labels = [], []
    for qid, truth in topics.ptkb_qrels().items():
        pairs += finetuned_pairs(turns[qid], context=True)
        labels += [truth[key] for key in turns[qid].ptkb]
    return pairs[:24], labels[:24]


@pytest.fixture(scope="module")
def trained(two_conversations: Path, ranker: RankerBase, tmp_path_factory) -> tuple[PtkbModel, Path]:
    topics = load_topics(two_conversations)
    model = train_model(topics, topics.queries("raw"), ranker, "bi-encoder", "bundled:minilm", "none", folds=2,
                        finetune="cross", epochs=1)
    path = tmp_path_factory.mktemp("model") / "ptkb-ft.json"
    return model.save(path), path


def test_turn_text_reads_the_opening_and_the_last_utterances() -> None:
    assert turn_text("q", [], True) == "q" and turn_text("q", ["a", "b"], False) == "q"
    assert turn_text("q", ["a", "b", "c", "d"], True) == "a | c | d | q"
    assert turn_text("q", ["a", "b"], True) == "a | b | q"  # the opening is one of the last two: once


@pytest.mark.parametrize("architecture", ["bi", "cross"])
def test_fine_tuning_is_seeded_and_survives_saving(architecture: str, labelled_pairs, tmp_path: Path) -> None:
    pairs, labels = labelled_pairs
    assert 0 < sum(labels) < len(labels)
    first = FineTuned.train(architecture, "bundled:minilm", pairs, labels, epochs=1, seed=0)
    again = FineTuned.train(architecture, "bundled:minilm", pairs, labels, epochs=1, seed=0)
    scores = first.score(pairs)
    assert np.array_equal(scores, again.score(pairs))
    # placed as every model ikatkit runs (ikatkit.placement): the CPU, float32, one thread, whatever the machine has
    assert (first.placement.device, first.placement.dtype, first.threads) == ("cpu", "float32", 1)
    low, high = (0.0, 1.0) if architecture == "cross" else (-1.0, 1.0)  # a probability; a cosine
    assert scores.shape == (24,) and ((low <= scores) & (scores <= high)).all() and scores.std() > 0
    first.save(tmp_path / "m")
    assert np.array_equal(FineTuned.load(architecture, tmp_path / "m").score(pairs), scores)
    with pytest.raises(IkatError, match="files are missing"):
        FineTuned.load(architecture, tmp_path / "absent")


def test_the_classifier_reads_the_fine_tuned_score(trained, two_conversations: Path, ranker: RankerBase) -> None:
    model, path = trained
    topics = load_topics(two_conversations)
    assert model.features == ("finetuned",) and model.finetuned is not None
    assert model.finetuned["architecture"] == "cross" and model.finetuned["epochs"] == 1
    folder = files_of(path)
    assert folder == path.parent / "ptkb-ft.json.finetuned"
    assert model.finetuned["digest"] == tree_digest(folder)
    loaded = PtkbModel.load(path)
    assert loaded == model and loaded.manifest()["finetuned"] == model.finetuned
    turns = topic_turns(topics, topics.queries("raw"))
    for qid in list(turns)[:6]:
        probabilities = model.probabilities(ranker, turns[qid])
        assert loaded.probabilities(ranker, turns[qid]) == probabilities
        assert all(0.0 <= p <= 1.0 for p in probabilities.values())
        assert list(probabilities) == list(turns[qid].ptkb)
    # the cross-validation that chose the threshold holds out whole conversations
    data = training_data(topics, topics.queries("raw"), ranker)
    groups = np.array(data.groups)
    for train, held_out in cv_folds(data, 2):
        assert not set(groups[train]) & set(groups[held_out])
    assert data.table[:, ALL_FEATURES.index("finetuned")].tolist() == [0.0] * len(data.truth)
    # a pipeline stage chooses what the model chooses
    records = records_for(topics)[:4]
    for record in records:
        record.query = record.utterance
    for record in ClassifyPtkb(ranker=ranker, classifier=str(path)).transform(records):
        assert record.ptkb == model.choose(model.ranked(ranker, turns[record.qid]))
        assert record.ptkb_trace["model"]["finetuned"]["digest"] == model.finetuned["digest"]


def test_changed_model_files_change_the_fingerprint_and_are_refused(trained, tmp_path: Path) -> None:
    model, path = trained
    copy = tmp_path / "m.json"
    copy.write_text(path.read_text())
    files = files_of(copy)
    files.mkdir()
    for file in files_of(path).iterdir():
        (files / file.name).write_bytes(file.read_bytes())
    config = {"stages": [{"stage": "classify_ptkb", "classifier": str(copy)}]}
    before = fingerprint_parts(config, [], 2023, None, models=False)
    assert before[f"classifier files {files}"] == "sha256:" + model.finetuned["digest"]
    assert PtkbModel.load(copy).threshold == model.threshold
    tokenizer = files / "tokenizer_config.json"
    tokenizer.write_text(tokenizer.read_text() + "\n")
    assert fingerprint_parts(config, [], 2023, None, models=False) != before
    with pytest.raises(IkatError, match="differ from those the classifier was saved with"):
        PtkbModel.load(copy)
    for file in files.iterdir():
        file.unlink()
    files.rmdir()
    with pytest.raises(IkatError, match="fine-tuned model folder is missing") as err:
        PtkbModel.load(copy)
    assert err.value.fix and "train-ptkb-classifier" in err.value.fix


def test_no_epoch_of_fine_tuning_is_one_error(two_conversations: Path, ranker: RankerBase) -> None:
    topics = load_topics(two_conversations)
    with pytest.raises(IkatError, match="0 epochs"):
        train_model(topics, topics.queries("raw"), ranker, "bi-encoder", "bundled:minilm", finetune="bi", epochs=0)

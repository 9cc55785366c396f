"""Every entry point checks its config first (preflight) through the run session: the Python API, `robustness`
and training refuse a missing model in seconds, before anything runs or is written."""

from __future__ import annotations

import pytest

from ikatkit.errors import IkatError

from bm25_config import BM25_EXTRACTIVE

MISSING = '\n[resources.encoder]\nkind = "bi-encoder"\nmodel = "{path}"\n'


@pytest.fixture()
def config(tmp_path):
    path = tmp_path / "missing-model.toml"
    path.write_text(BM25_EXTRACTIVE + MISSING.format(path=tmp_path / "no-such-model"), encoding="utf-8")
    return path


def test_the_python_api_checks_the_config_first(config, demo_dir, tmp_path):
    from ikatkit.pipelines import run_pipeline

    with pytest.raises(IkatError, match="no such file or folder: .*no-such-model"):
        run_pipeline(config, demo_dir / "topics.json", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_robustness_refuses_a_missing_model_before_any_run(config, demo_dir, tmp_path):
    from ikatkit.studies.robustness import robustness

    with pytest.raises(IkatError, match="no such file or folder: .*no-such-model"):
        robustness(config, demo_dir / "topics.json", None, ["clean", "terse"], tmp_path / "study")
    assert not (tmp_path / "study" / "runs").exists()


def test_training_checks_the_config_first(config, demo_dir, tmp_path):
    from ikatkit.training.refiner import train_refiner

    with pytest.raises(IkatError, match="no such file or folder: .*no-such-model"):
        train_refiner(config, demo_dir / "topics.json", tmp_path / "selector.json")

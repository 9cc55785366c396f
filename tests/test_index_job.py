"""The collection-encoding job every index kind shares (ikatkit.index.job), on a real local Ray: the placement the
actors ran with is what work.json and the manifest record, and a job whose actors run otherwise is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ikatkit.errors import IkatError

pytestmark = pytest.mark.slow
PASSAGES = 12


class _Embedding:
    """A shard's float32 embeddings, saved when whole."""

    def __init__(self, number: int, size: int, path: Path) -> None:
        self.rows, self.path = np.zeros((size, 384), dtype=np.float32), path

    def put(self, rows: np.ndarray, batch: dict[str, np.ndarray], mine: np.ndarray) -> None:
        self.rows[rows] = np.stack(batch["vector"][mine])

    def commit(self) -> None:
        with open(self.path, "wb") as handle:
            np.save(handle, self.rows)


class _Encode:
    """MiniLM on this actor's machine: as it is, or (``bf16 = False``) a machine without bfloat16, as a GPU before
    Ampere is (the actor's own process: its placement module says so)."""

    def __init__(self, threads: int, dtype: str, bf16: bool) -> None:
        from ikatkit import placement
        from ikatkit.index.encode import DenseEncoder

        if not bf16:
            placement.machine = lambda device=None: placement.Machine("cpu", "a CPU without bfloat16", bf16=False)
        self.encoder = DenseEncoder("bundled:minilm", "torch", threads, device="cpu", dtype=dtype)
        self.batch_size = 4

    def encode(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"vector": self.encoder.encode([str(t) for t in batch["text"]], self.batch_size)}


@pytest.fixture
def texts(passages_jsonl, tmp_path) -> tuple[Path, list[int]]:
    from ikatkit.index import job

    records = [json.loads(line) for line in passages_jsonl.read_text(encoding="utf-8").splitlines()[:PASSAGES]]
    out = tmp_path / "job"
    job.claim_work(out, {"source": "12 real passages", "dtype": "bfloat16"}, "test index")
    return out, job.write_texts(iter(records), out / "texts", 5)  # 3 shards: 5, 5, 2


def _actor():
    from ray import cloudpickle

    from ikatkit.index import job

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the actor class travels to Ray's workers
    return type("Encode", (_Encode, job.EncoderActor), {})


def test_actors_record_the_placement_they_ran_with_not_the_one_asked(texts, ray_local):
    """Asked bfloat16, actors on a machine without it compute float32: work.json and the job's result say float32
    (the driver's guess would have said bfloat16), and their embeddings are float32's."""
    import pyarrow.parquet as pq

    from ikatkit.index import job
    from ikatkit.index.encode import DenseEncoder

    out, sizes = texts
    actor = _actor()
    ran = job.encode_pending(out, "embeddings", ".npy", sizes, _Embedding, actor,
                             {"threads": 1, "dtype": "bfloat16", "bf16": False}, ray_local, 2, 1, 0, 4, "test index")
    assert ran == {"device": "cpu", "dtype": "float32", "tolerance": 1e-4, "batch_size": 4}
    assert json.loads((out / job.WORK).read_text())["placement"] == ran
    found = np.concatenate([np.load(out / "embeddings" / f"{n:05d}.npy") for n in range(3)])
    texts_in_order = [t for shard in job.text_shards(out / "texts")
                      for t in pq.read_table(shard).column("text").to_pylist()]
    expected = DenseEncoder("bundled:minilm", "torch", 1, device="cpu").encode(texts_in_order, 4)
    assert found.shape == (PASSAGES, 384) and np.allclose(found, expected, atol=1e-5)
    # resumed on machines that compute bfloat16: its vectors would mix with float32's, so it is refused
    (out / "embeddings" / "00001.npy").unlink()
    with pytest.raises(IkatError, match="encoded with float32 on cpu .* now run with bfloat16 on cpu"):
        job.encode_pending(out, "embeddings", ".npy", sizes, _Embedding, actor,
                           {"threads": 1, "dtype": "bfloat16", "bf16": True}, ray_local, 1, 1, 0, 4, "test index")
    assert not (out / "embeddings" / "00001.npy").exists()
    # on machines like the first run's it resumes, and nothing is encoded when nothing is left
    assert job.encode_pending(out, "embeddings", ".npy", sizes, _Embedding, actor,
                              {"threads": 1, "dtype": "bfloat16", "bf16": False}, ray_local, 1, 1, 0, 4,
                              "test index") == ran
    assert np.array_equal(np.load(out / "embeddings" / "00001.npy"), found[5:10])
    assert job.encode_pending(out, "embeddings", ".npy", sizes, _Embedding, actor, {}, ray_local, 1, 1, 0, 4,
                              "test index") == ran

"""Shared fixtures: the real iKAT data in ../shared/ikat (tests skip when it is absent)."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "ikat"
IKAT_DATA = Path(os.environ.get("IKAT_DATA", SHARED))
IKAT_2023 = IKAT_DATA / "2023"
NUGGETS_2024 = IKAT_DATA / "2024-nuggets"


@pytest.fixture(scope="session", autouse=True)
def one_read_per_llm() -> Iterator[None]:
    """Each LLM is read once a session: transformers parses a GGUF file three times a load (tokenizer, config,
    weights; 15-40 s for SmolLM2 on 2 cores). A later ``load_base`` of the same (model, GGUF file, placement),
    unchanged on disk, gets a deep copy of the first (fine-tuning and adapters change a network in place); quantized
    and failing loads go through as they are."""
    from ikatkit.llm import hf
    from ikatkit.placement import decide, machine

    real, loaded = hf.load_base, {}

    def load_base(model: str, quantization: str | None = None, gguf_file: str | None = None, placement=None):
        if quantization:
            return real(model, quantization, gguf_file, placement)
        path, file = hf.split_gguf(model, gguf_file)
        files = [Path(path, file)] if file else sorted(Path(path).glob("*"))
        stamp = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.is_file())
        key = (path, file, stamp, placement or decide("llm", machine()))
        if key not in loaded:
            loaded[key] = real(model, None, gguf_file, placement)
        return copy.deepcopy(loaded[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf, "load_base", load_base)
        yield


@pytest.fixture(scope="session")
def ikat2023() -> Path:
    """The folder with the real iKAT 2023 topics, qrels, passages and reference run."""
    if not (IKAT_2023 / "test_topics.json").exists():
        pytest.skip(f"real iKAT data not found at {IKAT_2023} (set IKAT_DATA)")
    return IKAT_2023


@pytest.fixture(scope="session")
def nuggets_2024() -> Path:
    """The folder with the iKAT 2024 nuggets and responses (beside 2023; IKAT_DATA turns it off too)."""
    if not (NUGGETS_2024 / "gold_nuggets_human.json").exists():
        pytest.skip(f"2024 nugget data not found at {NUGGETS_2024} (set IKAT_DATA)")
    return NUGGETS_2024


@pytest.fixture(scope="module", params=["ikat2023", "demo"])
def topics_file(request) -> Path:
    """The real 2023 test topics, then the embedded demo topics: a test taking it runs on both (the first
    skipped without ../shared). Modules with a ``topics_file`` of their own override it."""
    if request.param == "demo":
        return request.getfixturevalue("demo_dir") / "topics.json"
    return request.getfixturevalue("ikat2023") / "test_topics.json"


@pytest.fixture(scope="module")
def topics(topics_file):
    """The topics of ``topics_file``, loaded."""
    from ikatkit.topics import load_topics

    return load_topics(topics_file)


@pytest.fixture(scope="session")
def passages_jsonl(ikat2023, tmp_path_factory) -> Path:
    """The 894 distinct real passages as passage JSONL (id = doc_id:passage_id), first text kept."""
    import json

    texts: dict[str, str] = {}
    for name in ("train_provenance_passages.jsonl", "test_provenance_passages.jsonl"):
        for line in (ikat2023 / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts.setdefault(f"{record['doc_id']}:{record['passage_id']}", record["passage_text"])
    path = tmp_path_factory.mktemp("passages") / "passages.jsonl"
    path.write_text("".join(json.dumps({"id": k, "contents": v}) + "\n" for k, v in texts.items()), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def passages_index(passages_jsonl, tmp_path_factory) -> Path:
    """A real Lucene index (Anserini via Pyserini's jar) of the 894 real passages."""
    from ikatkit.index.build import build_index

    out = tmp_path_factory.mktemp("index") / "ikat2023-894"
    build_index([passages_jsonl], out, threads=2)
    return out


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray of 2 CPUs for the session (index dense and index sparse encode on it)."""
    from ikatkit.raycluster import connect

    ray = connect(None, num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def demo_dir() -> Path:
    """The embedded demo collection, topics and judgements (src/ikatkit/data/demo; always present)."""
    from ikatkit.pipelines.demo import demo_data

    return demo_data()


@pytest.fixture(scope="session")
def demo_index(demo_dir, tmp_path_factory) -> Path:
    """A real Lucene index of the 202 passages of the embedded demo collection."""
    from ikatkit.index.build import build_index

    out = tmp_path_factory.mktemp("demo-index") / "demo"
    build_index([demo_dir / "clueweb22"], out, fmt="clueweb22", threads=1)
    return out


@pytest.fixture(scope="session")
def demo_jsonl(demo_dir, tmp_path_factory) -> Path:
    """The demo collection's 202 passages as passage JSONL (what its Lucene index holds)."""
    import json

    from ikatkit.collection.readers import ReadStats, read_passages

    passages = read_passages(demo_dir / "clueweb22" / "en0000-00.json", "clueweb22", ReadStats())
    path = tmp_path_factory.mktemp("demo-passages") / "passages.jsonl"
    path.write_text("".join(json.dumps({"id": p.id, "contents": p.contents}) + "\n" for p in passages),
                    encoding="utf-8")
    return path


@dataclass(frozen=True)
class Judged:
    """A judged collection: topics, its passages (JSONL) and a Lucene index of them, passage qrels, and a few
    conversations to run on."""

    name: str
    topics: Path
    passages: Path
    index: Path
    qrels: Path
    conversations: tuple[str, ...]


@pytest.fixture(scope="module", params=["ikat2023", "demo"])
def judged(request) -> Judged:
    """The real 2023 test year over the 894 passages, then the embedded demo collection: a test taking it runs on
    both (the first skipped without ../shared)."""
    value = request.getfixturevalue
    if request.param == "demo":
        demo = value("demo_dir")
        return Judged("demo", demo / "topics.json", value("demo_jsonl"), value("demo_index"), demo / "qrels.txt",
                      ("demo-1", "demo-2"))
    year = value("ikat2023")
    return Judged("ikat2023", year / "test_topics.json", value("passages_jsonl"), value("passages_index"),
                  year / "qrels.txt", ("9-1", "9-2", "10-1"))


@pytest.fixture(scope="module")
def ranker(tmp_path_factory):
    """The bundled MiniLM bi-encoder (the PTKB model's ranker), its embeddings cached for the module."""
    from ikatkit.rank import make_ranker

    return make_ranker("bi-encoder", "bundled:minilm", cache_dir=tmp_path_factory.mktemp("emb"))


@pytest.fixture(scope="session")
def labelled_train(ikat2023, tmp_path_factory) -> Callable[[int], Path]:
    """``labelled_train(n)``: the first ``n`` conversations of the 2023 train topics with PTKB labels, a topic file."""

    def write(conversations: int) -> Path:
        data = json.loads((ikat2023 / "train_topics.json").read_text())
        labelled = [c for c in data if any(t.get("ptkb_provenance") for t in c["turns"])][:conversations]
        path = tmp_path_factory.mktemp("slice") / f"train_{conversations}.json"
        path.write_text(json.dumps(labelled))
        return path

    return write

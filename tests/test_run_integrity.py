"""Run integrity (issue 14): stage contracts and config checks at load, candidates keyed by retriever and query,
one writer per output folder, fingerprints that cover every input, written scores strictly decreasing."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ikatkit.errors import IkatError
from ikatkit.pipelines import load_config, run_pipeline
from ikatkit.pipelines.record import TurnRecord
from ikatkit.pipelines.base import INITIAL_FIELDS
from ikatkit.pipelines.registry import STAGES
from ikatkit.topics import load_topics

from bm25_config import BM25_EXTRACTIVE


GTR_HEAD = """
name = "gtr"
[resources.llm]
kind = "llm"
model = "bundled:smollm2"
[resources.bm25]
kind = "bm25"
[[stages]]
stage = "generate_answer"
[[stages]]
stage = "generate_queries"
[[stages]]
stage = "retrieve"
expand_ptkb = false
"""


def _write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def topics(demo_dir):
    """Demo conversation 1 (6 turns: two batches of 4), so these run without ../shared."""
    return load_topics(demo_dir / "topics.json").subset(["demo-1"])


# --- stage contracts ---------------------------------------------------------------------------------------------

def test_every_stage_declares_record_fields():
    fields = {f.name for f in dataclasses.fields(TurnRecord)}
    assert set(INITIAL_FIELDS) <= fields
    for cls in STAGES.values():
        assert isinstance(cls.requires, tuple) and isinstance(cls.provides, tuple), cls.name
        assert set(cls.requires) | set(cls.provides) <= fields, cls.name
        assert cls.provides or getattr(cls, "single_list_provides", ()), cls.name


@pytest.mark.parametrize("stages, where, message, fix", [
    # manual_query -> respond: no retrieve; today 332 empty turns called valid
    ('[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "gold_ptkb"\n'
     '[[stages]]\nstage = "respond"\ntask = "extractive"\n',
     "stages[2] (respond)", "'respond' needs 'ranking'", "'retrieve'"),
    # two retrieve stages and no fuse: two lists per turn
    ('[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "gold_ptkb"\n'
     '[[stages]]\nstage = "retrieve"\nsearcher = "bm25"\n[[stages]]\nstage = "retrieve"\nsearcher = "bm25"\n'
     '[[stages]]\nstage = "respond"\ntask = "extractive"\n',
     "stages[4] (respond)", "several candidate lists", "put 'fuse' before it"),
    # rerank before anything retrieved
    ('[[stages]]\nstage = "raw_query"\n[[stages]]\nstage = "rerank"\n',
     "stages[1] (rerank)", "'rerank' needs 'candidates'", "'retrieve'"),
])
def test_stage_order_is_checked_at_load(tmp_path, stages, where, message, fix):
    head = 'name = "x"\n[resources.bm25]\nkind = "bm25"\n[resources.minilm]\nkind = "bi-encoder"\nmodel = "m"\n'
    with pytest.raises(IkatError) as err:
        load_config(_write(tmp_path, head + stages))
    assert err.value.where == where and message in err.value.message and fix in err.value.fix


def test_gtr_without_fuse_is_rejected(tmp_path):
    respond = '[[stages]]\nstage = "respond"\ntask = "gtr_response"\n'
    with pytest.raises(IkatError, match=r"stage 'respond' needs 'ranking'.*several candidate lists"):
        load_config(_write(tmp_path, GTR_HEAD + '[[stages]]\nstage = "classify_ptkb"\n' + respond))
    fuse = '[[stages]]\nstage = "fuse"\n'
    config = load_config(_write(tmp_path, GTR_HEAD + fuse + '[[stages]]\nstage = "classify_ptkb"\n' + respond))
    assert [s["stage"] for s in config.stages][-3:] == ["fuse", "classify_ptkb", "respond"]


# --- config checks at load ---------------------------------------------------------------------------------------

def test_an_unknown_rewrite_task_names_its_config_line(tmp_path):
    text = GTR_HEAD + '[[stages]]\nstage = "rewrite"\ntask = "rtg_rewrote"\n'
    line = text.splitlines().index('task = "rtg_rewrote"') + 1
    stage = text.count("[[stages]]") - 1
    with pytest.raises(IkatError) as err:
        load_config(_write(tmp_path, text))
    assert err.value.where == f"stages[{stage}].task, line {line}" and err.value.path.name == "config.toml"
    assert "'rtg_rewrote'" in err.value.message and "'rtg_rewrite_chat'" in err.value.fix


@pytest.mark.parametrize("edit, where, message, fix", [
    (("k = 20", 'k = "ten"'), "stages[2].k (retrieve)", "k = 'ten' is not of type int", "int"),
    (("k = 20", "kk = 5"), "stages[2].kk (retrieve)", "unknown option 'kk'", "['expand_ptkb', 'k']"),
    (("expand_ptkb = false", "expand_ptkb = 1"), "stages[2].expand_ptkb (retrieve)", "is not of type bool", "bool"),
    (("batch_size = 4", "batch_size = 0"), "batch_size", "batch_size = 0 is not a positive integer", "1 or more"),
    (("batch_size = 4", 'batch_size = "4"'), "batch_size", "batch_size = '4' is not a int", "configs/demo.toml"),
    (('task = "extractive"', 'task = "rtg_response"'), "stages[3] (respond)", "needs an LLM", "extractive"),
    (('task = "extractive"', 'task = "rtg_responce"'), "stages[3] (respond)", "unknown task 'rtg_responce'",
     "rtg_response"),
    (('kind = "bm25"', 'kind = "bm52"'), "resources.bm25.kind", "unknown kind 'bm52'", "'bi-encoder'"),
    (('kind = "bm25"', 'kind = "bm25"\nk1 = "high"'), "resources.bm25.k1", "k1 = 'high' is not of type float", "float"),
    (('kind = "bm25"', 'kind = "bm25"\nkl = 0.9'), "resources.bm25.kl", "unknown option 'kl'",
     "['b', 'k1', 'parallel_from', 'rm3', 'threads'"),
    (('run_type = "manual"', 'run_type = "manuel"'), "run_type", "unknown run_type 'manuel'", "manual"),
    (('name = "bm25-extractive"', 'name = "bm25-extractive"\nbatchsize = 4'), "batchsize", "unknown key 'batchsize'",
     "batch_size"),
])
def test_config_mistakes_are_one_clear_error_at_load(tmp_path, edit, where, message, fix):
    path = _write(tmp_path, BM25_EXTRACTIVE.replace(*edit))
    with pytest.raises(IkatError) as err:
        load_config(path)
    assert err.value.path == path and err.value.where == where
    assert message in err.value.message and fix in err.value.fix


def test_a_bad_config_fails_before_any_index_or_model_opens(tmp_path, topics):
    path = _write(tmp_path, BM25_EXTRACTIVE.replace("k = 20", 'k = "ten"'))
    with pytest.raises(IkatError, match="is not of type int"):
        run_pipeline(path, topics, tmp_path / "out", index=tmp_path / "no-index")  # no index: it never opened
    assert not (tmp_path / "out").exists()


# --- candidates keyed by retriever and query; rerank and fuse over them -----------------------------------------

TWO_RETRIEVERS = """
name = "two-retrievers"
run_type = "manual"
batch_size = 8

[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"

[resources.bm25]
kind = "bm25"

[resources.bm25_flat]
kind = "bm25"
k1 = 1.2
b = 0.75

[[stages]]
stage = "manual_query"

[[stages]]
stage = "gold_ptkb"

[[stages]]
stage = "retrieve"
searcher = "bm25"
k = 10
expand_ptkb = false

[[stages]]
stage = "retrieve"
searcher = "bm25_flat"
k = 8
expand_ptkb = false

[[stages]]
stage = "rerank"
ranker = "minilm"
searcher = "bm25"

[[stages]]
stage = "fuse"
method = "rrf"

[[stages]]
stage = "respond"
task = "extractive"
searcher = "bm25"
"""


def test_two_retrievers_keep_their_own_candidates(tmp_path, topics, demo_index):
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.retrieve.fusion import rrf

    outcome = run_pipeline(_write(tmp_path, TWO_RETRIEVERS), topics, tmp_path / "run", index=demo_index,
                           cache_dir=tmp_path / "cache")
    record = outcome.records[2]
    query = record.resolved_utterance
    assert list(record.candidates) == [f"bm25\t{query}", f"bm25_flat\t{query}"]
    for key, k, (k1, b) in ((f"bm25\t{query}", 10, (0.9, 0.4)), (f"bm25_flat\t{query}", 8, (1.2, 0.75))):
        hits = Bm25Searcher(demo_index, k1, b).batch_search({"q": query}, k)["q"]
        assert record.candidates[key] == hits
        assert {pid for pid, _ in record.reranked[key]} == {pid for pid, _ in record.candidates[key]}
    assert record.ranking == rrf(list(record.reranked.values()), 1000)
    assert outcome.valid is True
    back = TurnRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert back.candidates == record.candidates  # the keys round-trip through checkpoints


# --- one writer per --out; the fingerprint written only before the first batch -----------------------------------

def test_a_live_run_holds_the_folder_and_a_dead_ones_lock_is_stale(tmp_path, topics, demo_index):
    config = _write(tmp_path, BM25_EXTRACTIVE)
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from ikatkit.lock import "
         "run_lock\nwith run_lock(Path(sys.argv[1])):\n print('held', flush=True); time.sleep(120)", str(out)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout.readline().strip() == "held"
        for restart in (False, True):
            with pytest.raises(IkatError, match=rf"another run is writing this folder \(process {holder.pid} on "):
                run_pipeline(config, topics, out, index=demo_index, restart=restart)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert f"process {holder.pid} " in (out / "run.lock").read_text()  # left behind by a killed run
    outcome = run_pipeline(config, topics, out, index=demo_index)
    assert outcome.valid is True and outcome.batches_done_now == 2
    assert not (out / "run.lock").exists()  # a finished run leaves no lock file


def test_the_lock_file_goes_however_a_run_ends(tmp_path, topics):
    """A run that fails on bad input, or is interrupted, removes run.lock too (a killed one cannot: its flock is
    free, the test above)."""
    from ikatkit.lock import run_lock

    config = _write(tmp_path, BM25_EXTRACTIVE)
    out = tmp_path / "out"
    with pytest.raises(IkatError, match="no-index"):
        run_pipeline(config, topics, out, index=tmp_path / "no-index")
    assert not out.exists()  # the lock gone, and the folder the run made too: it stayed empty
    with pytest.raises(KeyboardInterrupt):
        with run_lock(out):
            assert (out / "run.lock").read_text().startswith(f"process {os.getpid()} ")
            raise KeyboardInterrupt
    assert not (out / "run.lock").exists()


def test_fingerprint_only_before_the_first_batch_and_unstamped_checkpoints_refused(tmp_path, topics,
                                                                                   demo_index):
    config = _write(tmp_path, BM25_EXTRACTIVE)
    out = tmp_path / "out"
    with pytest.raises(IkatError, match="no-index"):  # fails while opening the index: no batch ran
        run_pipeline(config, topics, out, index=tmp_path / "no-index")
    assert not (out / "checkpoints" / "fingerprint.json").exists()
    other = _write(tmp_path, BM25_EXTRACTIVE.replace("k = 20", "k = 10"), "other.toml")
    first = run_pipeline(other, topics, out, index=demo_index)  # the corrected command is not blocked
    assert {len(t.responses[0].passages) for t in first.run.turns} == {10}
    stamp = json.loads((out / "checkpoints" / "fingerprint.json").read_text())
    assert set(stamp["parts"]) == {"config", "prompts", "topics", "index", "ikatkit", "threads", "device"}
    copied = tmp_path / "copied"
    (copied / "checkpoints").mkdir(parents=True)
    for batch in (out / "checkpoints").glob("batch-*.json"):
        (copied / "checkpoints" / batch.name).write_bytes(batch.read_bytes())
    with pytest.raises(IkatError, match="checkpoints without a fingerprint"):
        run_pipeline(config, topics, copied, index=demo_index)
    assert run_pipeline(config, topics, copied, index=demo_index, restart=True).batches_done_now == 2


def test_a_resume_after_a_prompt_edit_is_refused(tmp_path, topics, demo_index, monkeypatch):
    from importlib.resources import files

    import ikatkit.pipelines.fingerprint as fp

    prompts = tmp_path / "pkg" / "prompts"
    prompts.mkdir(parents=True)
    for prompt in (files("ikatkit.llm") / "prompts").iterdir():
        (prompts / prompt.name).write_text(prompt.read_text(encoding="utf-8"))
    monkeypatch.setattr(fp, "files", lambda package: tmp_path / "pkg")
    config = _write(tmp_path, BM25_EXTRACTIVE)
    with pytest.raises(IkatError, match="rerun to resume"):
        run_pipeline(config, topics, tmp_path / "out", index=demo_index, max_batches=1)
    (prompts / "rtg_response.txt").write_text((prompts / "rtg_response.txt").read_text() + "\nBe brief.\n")
    with pytest.raises(IkatError, match="holds checkpoints of other prompts — fix: use a new --out"):
        run_pipeline(config, topics, tmp_path / "out", index=demo_index)


def test_run_reports_turns_without_passages(tmp_path, topics, demo_index):
    config = _write(tmp_path, BM25_EXTRACTIVE.replace('stage = "manual_query"', 'stage = "raw_query"'))
    outcome = run_pipeline(config, topics, tmp_path / "out", index=demo_index)
    manifest = json.loads(outcome.manifest_file.read_text())
    empty = [r.qid for r in outcome.records if not r.ranking]
    assert manifest["turns_without_passages"] == len(empty)
    assert ("WARNING" in outcome.summary()) == bool(empty)


# --- fingerprint parts, each ----------------------------------------------------------------------------------------

def _parts(raw, records, index=None, memo=None):
    from ikatkit.pipelines.fingerprint import fingerprint_parts

    return fingerprint_parts(raw, records, 2023, index, memo)


def test_each_input_changes_its_fingerprint_part(tmp_path, monkeypatch):
    import torch

    import ikatkit.pipelines.fingerprint as fp

    raw = {"name": "x", "stages": [], "resources": {"llm": {"kind": "llm", "model": str(tmp_path / "model"),
                                                             "adapter": str(tmp_path / "adapter")}}}
    for folder in ("model", "adapter"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "weights.bin").write_bytes(b"\x00" * 64)
    records = [{"qid": "9-1_1", "utterance": "hi"}]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"counts": {"passages": len(name)}, "id": name}))
    base = _parts(raw, records, tmp_path / "a")

    def changed(**new) -> set[str]:
        now = _parts(new.get("raw", raw), new.get("records", records), new.get("index", tmp_path / "a"))
        return {k for k in base.keys() | now.keys() if base.get(k) != now.get(k)}

    assert changed() == set()
    assert changed(raw={**raw, "batch_size": 8}) == {"config"}
    assert changed(records=[{"qid": "9-1_1", "utterance": "hi!"}]) == {"topics"}
    assert changed(index=tmp_path / "b") == {"index"}
    (tmp_path / "model" / "weights.bin").write_bytes(b"\x01" * 64)
    assert changed() == {"resource llm"}
    base = _parts(raw, records, tmp_path / "a")
    (tmp_path / "adapter" / "weights.bin").write_bytes(b"\x01" * 64)
    assert changed() == {"resource llm"}
    base = _parts(raw, records, tmp_path / "a")
    raw["resources"]["dense"] = {"kind": "dense", "index": str(tmp_path / "b")}
    base = _parts(raw, records, tmp_path / "a")
    (tmp_path / "b" / "manifest.json").write_text(json.dumps({"rebuilt": True}))
    assert changed() == {"resource dense"}
    base = _parts(raw, records, tmp_path / "a")
    monkeypatch.setattr(fp, "__version__", "9.9.9")
    assert changed() == {"ikatkit"}
    monkeypatch.undo()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        assert changed() == {"threads"}
    finally:
        torch.set_num_threads(threads)
    from ikatkit import placement

    assert base["device"] == placement.machine().name
    monkeypatch.setattr(placement, "machine", lambda device=None: placement.Machine("cuda", "NVIDIA H200", True))
    assert changed() == {"device"}  # a run begun on the CPU is not resumed on a GPU


def test_every_option_of_a_resource_naming_a_file_or_folder_is_its_identity(tmp_path):
    """Each kind's options naming a file or folder (its ``files``, and every path parameter of its searcher that its
    check accepts as an option) change ``resource_identity`` when what they name changes."""
    import inspect

    from ikatkit.pipelines.fingerprint import resource_identity
    from ikatkit.pipelines.resources import KINDS, Resource

    def accepted(kind, options) -> bool:
        try:
            kind.check(dict(options))
        except IkatError as err:
            return "unknown option" not in err.message
        return True

    walked = set()
    for kind in KINDS.values():
        base = {"model": "bundled:minilm"} if kind.models else {}
        base.update({key: "d" for key in kind.files[:1]})
        searcher = inspect.signature(kind.searcher_class().__init__).parameters if kind.searcher_class else {}
        path_params = {n for n, p in searcher.items()
                       if "Path" in str(p.annotation) and accepted(kind, {**base, n: "d"})}
        assert path_params <= set(kind.files), kind.name
        for key in kind.files:
            folder = tmp_path / kind.name / key
            folder.mkdir(parents=True)
            (folder / "manifest.json").write_text('{"built": 1}')
            resource = Resource("r", kind, {**base, key: str(folder)})
            before = resource_identity(resource)
            (folder / "manifest.json").write_text('{"built": 2}')
            assert resource_identity(resource) != before, (kind.name, key)
            walked.add((kind.name, key))
    assert {("dense", "path"), ("dense", "index"), ("partitioned-bm25", "partitions")} <= walked


def test_model_identity_of_hub_ids_is_the_cached_revision(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from ikatkit.pipelines.fingerprint import model_identity

    snapshot = tmp_path / "models--org--model" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "models--org--model" / "refs").mkdir()
    (tmp_path / "models--org--model" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_identity("org/model") == "hub:org/model@0123abcd"
    assert model_identity("org/absent") == "hub:org/absent@not in the local cache"


def test_bundled_model_identity_is_its_content_and_memoized(tmp_path):
    import hashlib

    from ikatkit.models import resolve_model
    from ikatkit.pipelines.fingerprint import model_identity

    gguf = Path(resolve_model("bundled:smollm2"))
    expected = hashlib.sha256(f"{gguf.name}\0{hashlib.sha256(gguf.read_bytes()).hexdigest()}\n".encode())
    assert model_identity("bundled:smollm2", tmp_path) == "sha256:" + expected.hexdigest()
    assert len(list(tmp_path.glob("*.sha256"))) == 1
    assert model_identity("bundled:smollm2", tmp_path) == "sha256:" + expected.hexdigest()


# --- written runs: strictly decreasing scores --------------------------------------------------------------------

def test_written_scores_strictly_decrease_in_rank_order_even_as_float32():
    import numpy as np

    from ikatkit.runs.model import strictly_decreasing

    ranking = [("d", 0.5), ("c", 0.5), ("b", 0.5), ("a", 0.4), ("e", 0.4000000001), ("f", 0.1)]
    fixed = strictly_decreasing(ranking)
    assert [pid for pid, _ in fixed] == ["d", "c", "b", "a", "e", "f"]
    single = [np.float32(s) for _, s in fixed]
    assert all(x > y for x, y in zip(single, single[1:]))
    assert fixed[0] == ("d", 0.5) and fixed[5] == ("f", 0.1)  # scores that do not tie are kept as they are
    assert fixed[1][1] == float(np.nextafter(np.float32(0.5), np.float32(0)))

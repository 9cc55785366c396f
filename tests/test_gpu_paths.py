"""The GPU paths decided and checked on the CPU (issue 59): placement (device, dtype, tolerance) from a machine
record, caches kept apart by device and dtype, the cross-encoder's and the encoder's sorted and prefetched paths
equal to the plain ones, the static KV cache's logits equal the eager ones. GPU-only checks skip on a CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ikatkit.errors import IkatError
from ikatkit.placement import TOLERANCE, Machine, Placement, decide

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
import shapes  # noqa: E402

CPU, H200, T4 = Machine("cpu"), Machine("cuda", "NVIDIA H200", bf16=True), Machine("cuda", "Tesla T4", bf16=False)


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


needs_cuda = pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (none here): bench/gpu/run.py measures it")


def test_placement_from_a_machine_record():
    assert decide("bi-encoder", CPU) == Placement("cpu", "float32", None)  # the same bits in any batch
    assert decide("encoder", CPU) == Placement("cpu", "float32", 1e-4)
    assert decide("bi-encoder", H200) == Placement("cuda", "float32", 1e-4)
    assert decide("encoder", H200).dtype == "float16" and decide("cross-encoder", H200).dtype == "float16"
    assert decide("llm", H200, "bfloat16").dtype == "bfloat16"
    assert decide("llm", T4, "bfloat16").dtype == "float16"  # no native bfloat16 there
    assert decide("encoder", CPU, "bfloat16") == Placement("cpu", "bfloat16", 5e-2)
    with pytest.raises(IkatError, match="float16 is not computed on the CPU"):
        decide("llm", CPU, "float16")
    with pytest.raises(IkatError, match="unknown dtype"):
        decide("llm", CPU, "half")


def test_bi_encoder_caches_keep_devices_and_dtypes_apart(tmp_path):
    """The embedding cache's name covers device and dtype: a GPU's or a bfloat16 cache is never a CPU one."""
    from ikatkit.rank.biencoder import BiEncoder

    cpu = BiEncoder("bundled:minilm", cache_dir=tmp_path)
    names = {cpu.identity(cpu.placement), cpu.identity(decide("bi-encoder", H200)),
             cpu.identity(decide("bi-encoder", H200, "float16"))}
    assert len(names) == 3
    half = BiEncoder("bundled:minilm", cache_dir=tmp_path, dtype="bfloat16")
    assert half.placement == Placement("cpu", "bfloat16", 5e-2)
    texts = ["I eat no meat", "I'm vegetarian.", "Which phone should I buy?"]
    exact, rough = cpu.encode(texts), half.encode(texts)
    assert np.min(np.sum(exact * rough, axis=1)) > 0.99
    assert len(list(tmp_path.glob("*.sqlite"))) == 2


def test_bi_encoder_checks_each_batch_shape_once(tmp_path):
    """The first batch of a shape (rows, tokens) is checked against its texts alone; the verdict is kept, so a
    second ranker on the cache batches that shape without checking, with each text's own bits."""
    from ikatkit.rank.biencoder import BiEncoder

    first = BiEncoder("bundled:minilm", cache_dir=tmp_path)
    first.encode(["apple banana cherry", "river mountain protein"])
    assert first.stats["shapes_checked"] == 1
    second = BiEncoder("bundled:minilm", cache_dir=tmp_path)
    texts = ["runner apple river", "banana cherry mountain"]
    lengths = {len(ids) for ids in second.model.tokenizer(texts)["input_ids"]}
    assert lengths == {len(ids) for ids in second.model.tokenizer(["apple banana cherry"])["input_ids"]}
    batched = second.encode_new(texts)
    assert second.stats["shapes_checked"] == 0
    for text in texts:
        assert np.array_equal(batched[text], second._run([text])[0])


def test_cross_encoder_sorted_batches_keep_the_input_order(tmp_path):
    """Length-sorted batches (the GPU path, here on the CPU in float32) score each pair as predict does, in the
    input order."""
    from ikatkit.rank.crossencoder import CrossEncoderRanker

    folder = shapes.minilm(tmp_path / "cross", "cross", layers=2)
    ranker = CrossEncoderRanker(str(folder), backend="torch", device="cpu", batch_size=3)
    pairs = [("w1 w2", text) for text in shapes.passages(10, words=40)] + [("w3", "w4")]
    plain = ranker.model.predict(pairs, batch_size=3, show_progress_bar=False)
    sorted_ = ranker.score_sorted(pairs)
    assert np.abs(np.array(sorted_) - plain).max() < 1e-5
    assert np.argsort(sorted_).tolist() == np.argsort(plain).tolist()


def test_encoder_prefetched_path_equals_encode(tmp_path):
    """The GPU path of DenseEncoder (tokenized ahead by a thread, length-sorted, one copy back), run on the CPU in
    float32: the same embeddings as sentence-transformers' encode to 1e-6, in the input order; bfloat16 on the
    CPU within cosine 0.99."""
    from ikatkit.index.encode import DenseEncoder

    folder = shapes.minilm(tmp_path / "bi", "bi", layers=2)
    texts = shapes.passages(40, words=60) + ["w1", ""]
    encoder = DenseEncoder(str(folder), device="cpu")
    plain = encoder.encode(texts, batch_size=8)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    fast = encoder._encode_torch(texts, [order[s:s + 8] for s in range(0, len(order), 8)],
                                 np.zeros_like(plain))
    assert np.abs(fast - plain).max() < 1e-6
    rough = DenseEncoder(str(folder), device="cpu", dtype="bfloat16").encode(texts, batch_size=8)
    assert np.min(np.sum(rough * plain, axis=1)) > 0.99


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return shapes.llama(tmp_path_factory.mktemp("llama") / "tiny", "tiny")


def test_llm_cache_key_records_device_and_dtype(tiny_llama, tmp_path):
    from ikatkit.llm.hf import TransformersLLM

    question = [{"role": "user", "content": "w1 w2 w3"}]
    exact = TransformersLLM(str(tiny_llama), cache_dir=str(tmp_path), max_new_tokens=4)
    assert exact.identity()["device"] == "cpu" and exact.identity()["dtype"] == "float32"
    half = TransformersLLM(str(tiny_llama), cache_dir=str(tmp_path), max_new_tokens=4, dtype="bfloat16")
    assert exact._key(question, exact.params) != half._key(question, half.params)
    exact.chat([question])
    half.chat([question])
    assert half.stats["misses"] == 1  # the float32 output does not serve it
    with pytest.raises(IkatError, match="unknown decoding"):
        TransformersLLM(str(tiny_llama), decoding="fast")


def test_static_kv_cache_equals_eager_decoding(tiny_llama):
    """The fast path (a static KV cache, compiled on CUDA) against the eager one on the same prompts: logits
    within float32 error, the same greedy tokens."""
    import torch

    from ikatkit.llm.hf import TransformersLLM

    eager = TransformersLLM(str(tiny_llama), max_new_tokens=12)
    static = TransformersLLM(str(tiny_llama), max_new_tokens=12, decoding="static")
    assert eager.decoding == "eager" and static.identity()["decoding"] == "static"
    texts = [eager.prompt_text([{"role": "user", "content": c}]) for c in ("w1 w2 w3 w4 w5", "w9")]
    inputs = eager.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    runs = []
    for llm in (eager, static):
        with torch.no_grad():
            runs.append(llm.network.generate(**inputs, max_new_tokens=12, do_sample=False, output_logits=True,
                                             return_dict_in_generate=True, pad_token_id=llm.tokenizer.pad_token_id,
                                             **llm.decoding_options()))
    assert torch.equal(runs[0].sequences, runs[1].sequences)
    for a, b in zip(runs[0].logits, runs[1].logits):
        assert torch.allclose(a, b, atol=1e-4)


@needs_cuda
def test_bi_encoder_batches_on_cuda_within_its_tolerance(tmp_path):
    from ikatkit.rank.biencoder import BiEncoder

    folder = shapes.minilm(tmp_path / "bi", "bi")
    texts = shapes.passages(300)
    ranker = BiEncoder(str(folder), device="cuda", batch_size=256, cache_dir=tmp_path)
    assert ranker.batch_size == 256 and ranker.placement.tolerance == 1e-4
    batched = ranker.encode_new(texts)
    alone = BiEncoder(str(folder), device="cpu", cache_dir=tmp_path)
    query = alone.encode(["w1 w2"])[0]
    for text in texts[:20]:
        assert abs(float(batched[text] @ query) - float(alone.encode([text])[0] @ query)) < 1e-4


def test_gpu_bench_says_it_needs_cuda():
    if _cuda():
        pytest.skip("CUDA is here: the bench would run")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu" / "run.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "bench/gpu/run.py needs a CUDA GPU (PyTorch sees none here); docs/benchmarks.md#gpu says how it runs"]


def test_gpu_bench_rehearses_every_part_on_the_cpu(tmp_path):
    """`bench/gpu/run.py --rehearse`: every part of the GPU bench runs through ikatkit's classes on the CPU at toy
    sizes without an error (the script checked before a GPU machine's minutes are spent); where both sides of a
    comparison run float32 on the CPU, they agree."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu" / "run.py"), "--rehearse", "--turns", "1",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    parts = json.loads((tmp_path / "gpu.json").read_text(encoding="utf-8"))
    assert list(parts) == ["environment", "dense_encoder_minilm_l6", "bi_encoder_minilm_l6", "cross_encoder_minilm_l6",
                           "splade_encoder_bert_base", "sparse_hdf5_search", "cross_encoder_minilm_l12",
                           "llama_2_7b_fp16", "llama_2_7b_4bit", "rtg_turn_end_to_end", "llama_3_8b_fp16"]
    assert not [name for name, part in parts.items() if "error" in part or "skipped" in part
                and name != "llama_2_7b_4bit"]
    assert parts["environment"]["gpu"].startswith("none: a rehearsal")
    assert parts["dense_encoder_minilm_l6"]["min_cosine_vs_fp32"] > 1 - 1e-6
    assert parts["bi_encoder_minilm_l6"]["max_score_diff_vs_batch1_fp32_300"] < 1e-4
    for layers in (6, 12):  # the GPU's path (torch, length-sorted batches) in bfloat16 against float32
        cross = parts[f"cross_encoder_minilm_l{layers}"]
        assert set(cross) == {"bfloat16", "float32", "top10_same_as_fp32", "max_score_diff_vs_fp32", "seconds"}
        assert cross["max_score_diff_vs_fp32"] < TOLERANCE["bfloat16"]
    splade = parts["splade_encoder_bert_base"]
    assert splade["float32"]["terms_per_passage"] > 0 and splade["bfloat16"]["placement"]["dtype"] == "bfloat16"
    assert splade["bfloat16"]["against_float32"]["terms_jaccard_mean"] > 0.8
    organizers = parts["sparse_hdf5_search"]  # the device path (torch on the CPU here) against the numba kernel
    assert (organizers["passages"], organizers["same_top_1000"]) == (5000, "4 of 4")
    for shape in ("llama_2_7b_fp16", "llama_3_8b_fp16"):
        assert set(parts[shape]) == {"eager", "static", "seconds"}
        assert all(parts[shape][d]["batch8_tokens_per_s"] > 0 for d in ("eager", "static"))
    assert parts["rtg_turn_end_to_end"]["turns"] == 1

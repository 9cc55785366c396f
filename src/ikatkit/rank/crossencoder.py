"""Cross-encoder re-ranking (sentence_transformers.CrossEncoder) on PyTorch, or on OpenVINO in float32.

The OpenVINO backend runs the same weights, exported once to ONNX and kept under ``$IKATKIT_CACHE/onnx``
(default ``.cache/ikatkit``) by a hash of the weights, config and torch/transformers versions. It tokenizes every pair
once, batches pairs by token count and pads each batch only to its longest pair; scores equal PyTorch's to about
1e-7. On 2 CPU cores it scores about 2.3x as many pairs a second as ``CrossEncoder.predict`` (bench/bench_rerank.py).
sentence-transformers' own ``backend="openvino"`` needs optimum-intel, whose newest release (2.2.0) requires
transformers < 5.6, so it cannot be installed beside the pinned transformers 5.23.0 to be measured against this.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.models import resolve_model
from ikatkit.paths import cache_root
from ikatkit.rank.base import Ranker
from ikatkit.rank.identity import model_digest

BACKENDS = ("torch", "openvino")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class CrossEncoderRanker(Ranker):
    """Scores (query, passage) pairs jointly; e.g. ``cross-encoder/ms-marco-MiniLM-L-12-v2``.

    ``backend`` is ``"openvino"`` (CPU only) or ``"torch"``; by default OpenVINO where the model sits on the CPU.
    """

    def __init__(self, model: str, max_length: int = 512, batch_size: int = 32, device: str | None = None,
                 cache: bool = False, backend: str | None = None) -> None:
        super().__init__(cache=cache)
        from sentence_transformers import CrossEncoder

        self.model_name = model
        self.model = CrossEncoder(resolve_model(model), max_length=max_length, device=device)
        self.batch_size = batch_size
        self.backend = backend or ("openvino" if self.model.device.type == "cpu" else "torch")
        if self.backend not in BACKENDS:
            raise IkatError(f"unknown cross-encoder backend {self.backend!r}", fix=f"use one of {list(BACKENDS)}")
        if self.backend == "openvino" and self.model.device.type != "cpu":
            raise IkatError(f"the OpenVINO backend runs on the CPU, not {self.model.device}",
                            fix='use backend = "torch" on a GPU')
        self._infer = openvino_model(self.model) if self.backend == "openvino" else None

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        if self._infer is None:
            scores = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
            return [float(score) for score in scores]
        import torch

        features = tokenize(self.model, pairs)
        order = sorted(range(len(pairs)), key=lambda i: len(features["input_ids"][i]))
        result = [0.0] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            logits = self._infer(pad(self.model, features, batch, "np"))
            for i, score in zip(batch, self.model.activation_fn(torch.from_numpy(logits)).squeeze(-1).tolist()):
                result[i] = score
        return result


def tokenize(model: Any, pairs: list[tuple[str, str]]) -> dict[str, list[list[int]]]:
    """The model's inputs for ``pairs``, as ``predict`` tokenizes them (same truncation), but unpadded."""
    features = model.preprocess(pairs, processing_kwargs={"text": {"padding": False},
                                                          "common": {"return_tensors": None}})
    return {name: features[name] for name in INPUTS if name in features}


def pad(model: Any, features: dict[str, list[list[int]]], rows: list[int], kind: str) -> dict[str, Any]:
    """``rows`` of ``features`` padded to the longest of them, as ``kind`` ("np" or "pt") arrays."""
    return dict(model.tokenizer.pad({name: [values[i] for i in rows] for name, values in features.items()},
                                    return_tensors=kind))


def openvino_model(model: Any) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """A function from padded inputs to logits: ``model``'s transformer exported to ONNX (once, cached) and
    compiled by OpenVINO in float32 (never bf16, which it would pick on CPUs that have it)."""
    import openvino

    if len(model) != 1 or not hasattr(model[0], "model"):
        raise IkatError("the OpenVINO backend exports only single-module cross-encoders",
                        fix='use backend = "torch" for this model')
    network = model[0].model
    probe = pad(model, tokenize(model, [("a query", "a passage"), ("a longer query", "a longer passage text")]),
                [0, 1], "pt")
    path = export_onnx(network, probe)
    compiled = openvino.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                                 "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()

    def infer(inputs: dict[str, np.ndarray]) -> np.ndarray:
        return request.infer(inputs)[0].copy()

    import torch

    with torch.inference_mode():
        expected = network(**probe).logits.float().numpy()
    if not np.allclose(infer({name: value.numpy() for name, value in probe.items()}), expected, atol=1e-4):
        raise IkatError(f"the OpenVINO export of this model scores differently from PyTorch ({path})",
                        fix='use backend = "torch" for this model')
    return infer


def export_onnx(network: Any, example: dict[str, Any]) -> Path:
    """``network`` (a transformers sequence classifier) as ONNX with dynamic batch and length, exported once
    into the cache by a hash of its weights, config and the exporter's versions; written to a temporary folder
    first, then renamed into place."""
    import torch
    import transformers

    config = {key: value for key, value in network.config.to_dict().items() if key != "_name_or_path"}
    digest = model_digest(network, torch.__version__, transformers.__version__, config)
    folder = cache_root() / "onnx" / digest[:16]
    if (folder / "model.onnx").exists():
        return folder / "model.onnx"
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    work.mkdir(exist_ok=True)
    network.set_attn_implementation("eager")  # plain matmul-softmax attention, which OpenVINO fuses
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's warnings about Python control flow
            torch.onnx.export(network, (), str(work / "model.onnx"), kwargs=example, input_names=list(example),
                              output_names=["logits"], dynamo=False, opset_version=17,
                              dynamic_axes={**{name: {0: "batch", 1: "length"} for name in example},
                                            "logits": {0: "batch"}})
        try:
            os.replace(work, folder)
        except OSError:  # another process finished first
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder / "model.onnx"

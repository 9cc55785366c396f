"""Cross-encoder re-ranking (sentence_transformers.CrossEncoder) on PyTorch, or on OpenVINO in float32.

The OpenVINO backend runs the same weights, converted once to IR as the bi-encoder's are (ikatkit.openvino_export:
kept under ``$IKATKIT_CACHE/openvino`` by a hash of the weights, config and library versions). It tokenizes every pair
once, batches pairs by token count and pads each batch only to its longest pair; scores equal PyTorch's to about
1e-7. On 2 CPU cores it scores about 2.3x as many pairs a second as ``CrossEncoder.predict`` (bench/bench_rerank.py).
sentence-transformers' own ``backend="openvino"`` needs optimum-intel, whose newest release (2.2.0) requires
transformers < 5.6, so it cannot be installed beside the pinned transformers 5.23.0 to be measured against this.

On CUDA the torch backend runs in float16 (``ikatkit.placement``; ``dtype`` overrides it) over length-sorted
batches, each padded to its longest pair only; the scores come back in the input order. The CPU's torch path is
``CrossEncoder.predict`` as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.models import resolve_model
from ikatkit.openvino_export import compile_ir, export_ir, ir_folder, positional
from ikatkit.placement import PlacedModel
from ikatkit.rank.base import RankerBase

BACKENDS = ("torch", "openvino")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class CrossEncoderRanker(RankerBase, PlacedModel):
    """Scores (query, passage) pairs jointly; e.g. ``cross-encoder/ms-marco-MiniLM-L-12-v2``.

    ``backend`` is ``"openvino"`` (CPU only) or ``"torch"``; by default OpenVINO where the model sits on the CPU.
    ``threads``: OpenVINO's inference threads, not pinned to cores (default: as OpenVINO chooses, pinned).
    ``dtype``: ``auto`` (float16 on CUDA, float32 on the CPU), ``float32``, ``float16`` or ``bfloat16``.
    """

    kind = "cross-encoder"

    def __init__(self, model: str, max_length: int = 512, batch_size: int = 32, device: str | None = None,
                 cache: bool = False, backend: str | None = None, threads: int | None = None,
                 dtype: str = "auto") -> None:
        RankerBase.__init__(self, cache=cache)
        PlacedModel.__init__(self, device, dtype)  # threads: OpenVINO's (the torch backend takes PyTorch's)
        from sentence_transformers import CrossEncoder

        self.model_name = model
        self.model = self.placed(CrossEncoder(resolve_model(model), max_length=max_length, device="cpu"))
        self.batch_size = batch_size
        self.backend = backend or ("openvino" if self.model.device.type == "cpu" else "torch")
        if self.backend not in BACKENDS:
            raise IkatError(f"unknown cross-encoder backend {self.backend!r}", fix=f"use one of {list(BACKENDS)}")
        if self.backend == "openvino" and (self.model.device.type != "cpu" or self.placement.dtype != "float32"):
            raise IkatError(f"the OpenVINO backend runs on the CPU in float32, not on {self.model.device} in "
                            f"{self.placement.dtype}", fix='use backend = "torch" on a GPU or in another dtype')
        if threads is not None and self.backend != "openvino":
            raise IkatError("threads sets OpenVINO's threads; the torch backend takes PyTorch's", where="threads",
                            fix='remove threads, or use backend = "openvino"')
        self._infer = openvino_model(self.model, threads) if self.backend == "openvino" else None

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        if self._infer is None and self.placement.device == "cpu" and self.placement.dtype == "float32":
            scores = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
            return [float(score) for score in scores]
        return self.score_sorted(pairs)

    def score_sorted(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Scores of ``pairs`` in their order, computed in batches of pairs sorted by token count (each padded to
        its longest pair): on OpenVINO, or on PyTorch in the placement's dtype."""
        import torch

        features = tokenize(self.model, pairs)
        order = sorted(range(len(pairs)), key=lambda i: len(features["input_ids"][i]))
        result = [0.0] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            if self._infer is not None:
                logits = torch.from_numpy(self._infer(pad(self.model, features, batch, "np")))
            else:
                inputs = {k: v.to(self.model.device, non_blocking=True)
                          for k, v in pad(self.model, features, batch, "pt").items()}
                with torch.inference_mode():
                    logits = self.model[0].model(**inputs).logits.float()
            for i, score in zip(batch, self.model.activation_fn(logits).squeeze(-1).tolist()):
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


def openvino_model(model: Any, threads: int | None = None) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """A function from padded inputs to logits: ``model``'s transformer as OpenVINO IR (converted once into the
    cache) compiled for the CPU in float32; one clear error unless it scores two probe pairs as PyTorch does."""
    import torch

    if len(model) != 1 or not hasattr(model[0], "model"):
        raise IkatError("the OpenVINO backend runs only single-module cross-encoders",
                        fix='use backend = "torch" for this model')
    network = model[0].model
    network.set_attn_implementation("eager")  # plain matmul-softmax attention, which OpenVINO fuses
    probe = pad(model, tokenize(model, [("a query", "a passage"), ("a longer query", "a longer passage text")]),
                [0, 1], "pt")
    names = list(probe)
    config = {key: value for key, value in network.config.to_dict().items() if key != "_name_or_path"}
    path = export_ir(positional(network, names, _logits), [probe[name] for name in names],
                     ir_folder(network, "logits", names, config))
    request = compile_ir(path, threads, hint="LATENCY").create_infer_request()

    def infer(inputs: dict[str, np.ndarray]) -> np.ndarray:
        return request.infer([inputs[name] for name in names])[0].copy()

    with torch.inference_mode():
        expected = network(**probe).logits.float().numpy()
    if not np.allclose(infer({name: value.numpy() for name, value in probe.items()}), expected, atol=1e-4):
        raise IkatError(f"the OpenVINO conversion of this model scores differently from PyTorch ({path})",
                        fix='use backend = "torch" for this model')
    return infer


def _logits(network: Any, features: dict[str, Any]) -> Any:
    return network(**features).logits

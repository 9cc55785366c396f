"""Passage and query embeddings from a sentence-transformers model, on PyTorch or on OpenVINO (CPU).

Embeddings are always unit length (float32 here), so inner product is cosine. The OpenVINO backend runs the
model's transformer with its pooling, converted once with ``openvino.convert_model`` from the PyTorch module
and saved as IR (``model.xml``/``.bin``); the conversion is checked against PyTorch on probe texts. On the
2-core AVX2 machine of bench/bench_dense.py it encodes about 2x as many passages a second as PyTorch (the
torch backend is the default off the CPU and for models other than Transformer + mean/CLS pooling).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.models import load_sentence_transformer
from ikatkit.openvino_export import compile_ir, export_ir, ir_folder, positional

BACKENDS = ("auto", "torch", "openvino")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PROBE = ["a short query", "a longer passage about vegetarian protein sources for a marathon runner's diet, "
         "with lentils, tofu and beans", "x"]


def pooling_of(model: Any) -> str | None:
    """``mean`` or ``cls`` when the model is a transformer with that pooling (and maybe Normalize), else None."""
    kinds = [type(module).__name__ for module in model]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        return None
    mode = model[1].get_config_dict().get("pooling_mode")
    return mode if mode in ("mean", "cls") else None


def choose_backend(backend: str, model: Any) -> str:
    """``auto`` is OpenVINO for a supported model on the CPU, else PyTorch."""
    if backend not in BACKENDS:
        raise IkatError(f"unknown encoder backend {backend!r}", fix=f"use one of {list(BACKENDS)}")
    supported = model.device.type == "cpu" and pooling_of(model) is not None
    if backend == "openvino" and not supported:
        raise IkatError("the OpenVINO backend needs a transformer with mean or CLS pooling on the CPU",
                        fix="use --backend torch")
    return backend if backend != "auto" else ("openvino" if supported else "torch")


def _features(model: Any, texts: list[str]) -> dict[str, np.ndarray]:
    found = model.preprocess(texts)
    return {name: found[name].numpy() for name in INPUTS if name in found}


def compile_openvino(model: Any, threads: int | None = None) -> Any:
    """``model``'s transformer with its pooling as OpenVINO IR (converted once into the cache), compiled for the
    CPU in float32 on ``threads`` threads; one clear error unless it embeds the probe texts as PyTorch does
    (to 1e-4)."""
    import torch

    network = model[0].auto_model
    config = {key: value for key, value in network.config.to_dict().items() if key != "_name_or_path"}
    example = _features(model, PROBE[:2])
    names = list(example)
    pooled = positional(network, names, partial(_pool, pooling_of(model) or "mean"))
    folder = ir_folder(network, pooling_of(model), config)
    path = export_ir(pooled, [torch.from_numpy(example[name]) for name in names], folder)
    infer = compile_ir(path, threads)
    expected = model.encode(PROBE, normalize_embeddings=True, convert_to_numpy=True)
    if not np.allclose(np.concatenate([openvino_embed(infer, model, [text]) for text in PROBE]), expected, atol=1e-4):
        raise IkatError("the OpenVINO conversion of this model embeds differently from PyTorch",
                        fix='use --backend torch (index dense) or backend = "torch" (a bi-encoder resource)')
    return infer


def openvino_embed(infer: Any, model: Any, texts: list[str]) -> np.ndarray:
    """Unit-length embeddings of ``texts`` as one batch through a compiled model (``compile_openvino``)."""
    features = _features(model, texts)
    return infer([features[name] for name in INPUTS if name in features])[0]


def _pool(pooling: str, transformer: Any, features: dict[str, Any]) -> Any:
    """Unit-length ``pooling`` (mean or cls) embeddings of ``transformer`` over ``features`` (torch tensors)."""
    import torch

    hidden = transformer(**features).last_hidden_state
    if pooling == "cls":
        vectors = hidden[:, 0]
    else:
        mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(vectors, dim=-1)


class Encoder:
    """Unit-length float32 embeddings of texts; ``backend`` torch or openvino, on ``threads`` CPU threads
    (default: as the library chooses)."""

    def __init__(self, model: str, backend: str = "torch", threads: int | None = None,
                 device: str | None = None) -> None:
        self.model = load_sentence_transformer(model, device)
        self.backend = backend
        self.dimension = int(self.model.get_embedding_dimension())
        self._infer = None
        if backend == "openvino":
            self._infer = compile_openvino(self.model, threads)
        elif threads:
            import torch

            torch.set_num_threads(threads)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if self._infer is None:
            vectors = self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as encode() does: less padding
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            out[rows] = openvino_embed(self._infer, self.model, [texts[i] for i in rows])
        return out

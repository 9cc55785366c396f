"""Passage and query embeddings from a sentence-transformers model, on PyTorch or on OpenVINO (CPU).

Embeddings are always unit length (float32 here), so inner product is cosine. The OpenVINO backend runs the
model's transformer with its pooling, converted once with ``openvino.convert_model`` from the PyTorch module
and saved as IR (``model.xml``/``.bin``); the conversion is checked against PyTorch on probe texts. On the
2-core AVX2 machine of bench/bench_dense.py it encodes about 2x as many passages a second as PyTorch (the
torch backend is the default off the CPU and for models other than Transformer + mean/CLS pooling).

On CUDA (``ikatkit.placement``: float16, embeddings within cosine 0.999 of float32's) the torch backend keeps the
GPU busy: texts are sorted by length (the output keeps the input order), a thread tokenizes the next batches into
pinned memory while the GPU encodes the current one, and batches are large (``GPU_BATCH`` texts by default). The
CPU's float32 path is sentence-transformers' ``encode`` as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.models import load_sentence_transformer
from ikatkit.openvino_export import compile_ir, export_ir, ir_folder, positional
from ikatkit.placement import PlacedModel

BACKENDS = ("auto", "torch", "openvino")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
GPU_BATCH = 512  # texts per batch on CUDA unless a batch size is given
PREFETCH = 3  # batches tokenized ahead of the one being encoded
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


def prefetched(model: Any, texts: list[str], batches: list[list[int]], pin: bool) -> Iterator[dict[str, Any]]:
    """The model's inputs for each batch of rows of ``texts``, tokenized by a thread ``PREFETCH`` batches ahead of
    the consumer (the tokenizer releases the GIL), in pinned memory when ``pin``."""

    def prepare(rows: list[int]) -> dict[str, Any]:
        features = model.preprocess([texts[i] for i in rows])
        return {k: v.pin_memory() if pin else v for k, v in features.items() if hasattr(v, "pin_memory")}

    with ThreadPoolExecutor(1, thread_name_prefix="tokenize") as pool:
        pending = deque(pool.submit(prepare, rows) for rows in batches[:PREFETCH])
        for n in range(len(batches)):
            if n + PREFETCH < len(batches):
                pending.append(pool.submit(prepare, batches[n + PREFETCH]))
            yield pending.popleft().result()


class DenseEncoder(PlacedModel):
    """Unit-length float32 embeddings of texts; ``backend`` torch or openvino, on ``threads`` CPU threads while
    encoding (default: as the library chooses), on ``device`` (default: CUDA where visible) in ``dtype`` (``auto``:
    float16 on CUDA, float32 on the CPU; see ``ikatkit.placement``)."""

    kind = "encoder"

    def __init__(self, model: str, backend: str = "torch", threads: int | None = None,
                 device: str | None = None, dtype: str = "auto") -> None:
        super().__init__(device, dtype, None if backend == "openvino" else threads)
        self.model = self.placed(load_sentence_transformer(model, "cpu"))
        self.backend = backend
        self.dimension = int(self.model.get_embedding_dimension())
        self._infer = compile_openvino(self.model, threads) if backend == "openvino" else None

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """Embeddings of ``texts`` in their order, ``batch_size`` at a time (default: 32 on the CPU, ``GPU_BATCH``
        on CUDA)."""
        if self._infer is None and self.placement.device == "cpu" and self.placement.dtype == "float32":
            with self.computing():
                vectors = self.model.encode(texts, batch_size=batch_size or 32, normalize_embeddings=True,
                                            convert_to_numpy=True, show_progress_bar=False)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as encode() does: less padding
        size = batch_size or (32 if self.placement.device == "cpu" else GPU_BATCH)
        batches = [order[start:start + size] for start in range(0, len(order), size)]
        if self._infer is not None:
            for rows in batches:
                out[rows] = openvino_embed(self._infer, self.model, [texts[i] for i in rows])
            return out
        return self._encode_torch(texts, batches, out)

    def _encode_torch(self, texts: list[str], batches: list[list[int]], out: np.ndarray) -> np.ndarray:
        """The torch path off the CPU's float32: tokenized ahead, on the device in the placement's dtype, the
        embeddings kept on the device until the last batch is done (one copy back)."""
        import torch

        device = self.model.device
        done = []
        with torch.inference_mode(), self.computing():
            for features in prefetched(self.model, texts, batches, pin=device.type == "cuda"):
                inputs = {k: v.to(device, non_blocking=True) for k, v in features.items()}
                vectors = self.model(inputs)["sentence_embedding"].float()
                done.append(torch.nn.functional.normalize(vectors, dim=-1))
        rows = [i for batch in batches for i in batch]
        if done:
            out[rows] = torch.cat(done).cpu().numpy()
        return out

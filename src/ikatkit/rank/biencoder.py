"""Bi-encoder ranking: cosine similarity of sentence-transformers embeddings (the seed paper's MiniLM ranker).

On the CPU an embedding is an exact function of the model and the text, whatever else is encoded with it: texts
are encoded in batches of equal token length (sorted by length, then text), so no batch is padded, and the first
batch of each shape (rows, tokens) is checked against its texts encoded one at a time. A shape whose batch gives
other bits (as on Intel CPUs with AVX-512/AMX, whose kernels change with the number of rows) is encoded one text
at a time from then on; the verdicts are kept beside the embeddings. On CUDA texts are encoded in large,
length-sorted, padded batches, exact within the stated tolerance (``ikatkit.placement``: scores within 1e-4 of
batch-1 float32). Embeddings are kept on disk by model identity (device and dtype included, so a CPU cache never
serves a GPU run) and text (``<cache>/embeddings``), so a rerun or a resumed run reuses them and writes
byte-identical files.
"""

from __future__ import annotations

from itertools import groupby
from pathlib import Path

import numpy as np

from ikatkit.index.encode import choose_backend, compile_openvino, openvino_embed
from ikatkit.models import load_sentence_transformer
from ikatkit.paths import cache_root
from ikatkit.placement import PlacedModel, Placement
from ikatkit.rank.base import RankerBase
from ikatkit.rank.embedding_cache import EmbeddingCache
from ikatkit.digest import model_digest


class BiEncoder(RankerBase, PlacedModel):
    """Texts are compared by the cosine of their unit-length embeddings.

    ``threads``: PyTorch threads while encoding on the CPU (restored after). One by default: on a machine
    whose cores are shared, more threads spin in OpenMP barriers (measured on 2 busy cores: 2 threads encode
    one text at a time with 7.7x the CPU time of our batches, which match one thread's one-at-a-time; see
    bench/bench_biencoder.py). ``backend``: ``torch`` (default), ``openvino`` (the model converted as
    ``ikatkit index dense`` does, on ``threads`` OpenVINO threads; other bits than PyTorch's, so its own cache)
    or ``auto`` (OpenVINO where supported). ``cache_dir``: where the embedding cache lives (default
    ``$IKATKIT_CACHE/embeddings``).
    """

    kind = "bi-encoder"

    def __init__(self, model: str, batch_size: int = 32, device: str | None = None, threads: int = 1,
                 cache_dir: str | Path | None = None, backend: str = "torch", dtype: str = "auto") -> None:
        RankerBase.__init__(self, cache=True)  # scores are exact functions of the pair: kept by content
        PlacedModel.__init__(self, device, dtype)
        self.model_name = model
        self.model = self.placed(load_sentence_transformer(model, "cpu"))
        self.threads = threads if self.model.device.type == "cpu" else None
        self.backend = choose_backend(backend, self.model)
        self._infer = compile_openvino(self.model, self.threads) if self.backend == "openvino" else None
        identity = self.identity(self.placement)
        self.embeddings = EmbeddingCache(Path(cache_dir or cache_root() / "embeddings") / f"{identity[:32]}.sqlite")
        self.batch_size = batch_size
        self.stats.update(encoded=0, embedding_cache_hits=0, shapes_checked=0, shapes_one_at_a_time=0)

    def identity(self, placement: Placement) -> str:
        """The digest naming the embedding cache: the weights, the tokenizer, the library versions, where the model
        runs and in which dtype (``placement``), and the thread count (PyTorch's CPU kernels give other bits on
        other thread counts)."""
        import sentence_transformers
        import torch
        import transformers

        tokenizer = getattr(self.model.tokenizer, "backend_tokenizer", None)
        return model_digest(self.model, repr(self.model), self.model.max_seq_length, placement.device,
                            self.threads, *self._backend_identity(),
                            tokenizer.to_str() if tokenizer is not None else type(self.model.tokenizer).__name__,
                            torch.__version__, transformers.__version__, sentence_transformers.__version__,
                            placement.identity())

    def _backend_identity(self) -> tuple[str, ...]:
        """Nothing for PyTorch (its caches keep their identity), else the backend and its version."""
        if self.backend != "openvino":
            return ()
        import openvino

        return ("openvino", openvino.__version__)

    def _run(self, texts: list[str]) -> np.ndarray:
        if self._infer is not None:
            return openvino_embed(self._infer, self.model, texts)
        with self.computing():
            return self.model.encode(texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False)

    def _exact_batch(self, batch: list[str], length: int) -> np.ndarray:
        """Embeddings of equal-length texts with the bits each gets alone: batched where this shape (rows, tokens)
        was found to give them (checked on its first batch, the verdict kept in the cache), else one at a time."""
        if len(batch) == 1:
            return self._run(batch)
        shape = (len(batch), length)
        verdict = self.embeddings.shape_verdict(shape)
        if verdict is False:
            return np.concatenate([self._run([text]) for text in batch])
        vectors = self._run(batch)
        if verdict is None:
            alone = np.concatenate([self._run([text]) for text in batch])
            verdict = bool(np.array_equal(vectors, alone))
            self.embeddings.keep_shape_verdict(shape, verdict)
            self.stats["shapes_checked"] += 1
            self.stats["shapes_one_at_a_time"] += not verdict
            vectors = alone
        return vectors

    def encode_new(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Embeddings of distinct ``texts``: on the CPU in batches of equal token length (at most ``batch_size``
        each, every shape checked), on CUDA in length-sorted padded batches of ``batch_size``."""
        if not texts:
            return {}
        if self.placement.tolerance is not None:
            with self.computing():
                found = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                          convert_to_numpy=True, show_progress_bar=False)
            return dict(zip(texts, np.asarray(found, dtype=np.float32)))
        lengths = [len(ids) for ids in self.model.tokenizer(texts, truncation=True,
                                                            max_length=self.model.max_seq_length)["input_ids"]]
        vectors: dict[str, np.ndarray] = {}
        ordered = sorted(zip(lengths, texts))
        for length, group in groupby(ordered, key=lambda item: item[0]):
            same = [text for _, text in group]
            for start in range(0, len(same), self.batch_size):
                batch = same[start:start + self.batch_size]
                vectors.update(zip(batch, self._exact_batch(batch, length)))
        return vectors

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings of ``texts``, from the cache where it has them."""
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors = self.embeddings.get(unique)
        self.stats["embedding_cache_hits"] += len(vectors)
        new = self.encode_new([t for t in unique if t not in vectors])
        if new:
            self.embeddings.put(new)
            self.stats["encoded"] += len(new)
            vectors.update(new)
        return np.stack([vectors[t] for t in texts])

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        queries = self.encode([q for q, _ in pairs])
        texts = self.encode([t for _, t in pairs])
        return [float(x) for x in np.einsum("ij,ij->i", queries, texts)]

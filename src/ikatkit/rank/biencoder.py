"""Bi-encoder ranking: cosine similarity of sentence-transformers embeddings (the seed paper's MiniLM ranker)."""

from __future__ import annotations

import numpy as np

from ikatkit.models import resolve_model
from ikatkit.rank.base import Ranker, default_batch_size


class BiEncoder(Ranker):
    """Texts are encoded once per ranker (embeddings cached by content) and compared by cosine."""

    def __init__(self, model: str, batch_size: int | None = None, device: str | None = None) -> None:
        super().__init__()
        from sentence_transformers import SentenceTransformer

        self.model_name = model
        self.model = SentenceTransformer(resolve_model(model), device=device)
        self.batch_size = batch_size or default_batch_size(self.model.device)
        self._vectors: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings of ``texts``, encoding only those not seen before."""
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            vectors = self.model.encode(new, batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
            self._vectors.update(zip(new, vectors))
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 1))

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        queries = self.encode([q for q, _ in pairs])
        texts = self.encode([t for _, t in pairs])
        return [float(x) for x in np.einsum("ij,ij->i", queries, texts)]

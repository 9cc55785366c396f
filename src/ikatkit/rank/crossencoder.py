"""Cross-encoder re-ranking (sentence_transformers.CrossEncoder), batched by length to cut padding."""

from __future__ import annotations

from ikatkit.models import resolve_model
from ikatkit.rank.base import Ranker


class CrossEncoderRanker(Ranker):
    """Scores (query, passage) pairs jointly; e.g. ``cross-encoder/ms-marco-MiniLM-L-12-v2``."""

    def __init__(self, model: str, max_length: int = 512, batch_size: int = 32, device: str | None = None,
                 cache: bool = False) -> None:
        super().__init__(cache=cache)
        from sentence_transformers import CrossEncoder

        self.model_name = model
        self.model = CrossEncoder(resolve_model(model), max_length=max_length, device=device)
        self.batch_size = batch_size

    def _score_unique(self, pairs: list[tuple[str, str]]) -> list[float]:
        order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]) + len(pairs[i][1]), pairs[i]))
        scores = self.model.predict([pairs[i] for i in order], batch_size=self.batch_size, show_progress_bar=False,
                                    convert_to_numpy=True)
        result = [0.0] * len(pairs)
        for i, score in zip(order, scores):
            result[i] = float(score)
        return result

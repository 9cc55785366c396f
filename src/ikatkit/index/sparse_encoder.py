"""SPLADE term weights of passages and queries: a masked-LM's logits, ``log(1 + relu(logit))`` max-pooled over the
text's tokens (SPLADE's max aggregation), one weight per vocabulary term, quantized to integers.

The model is loaded with transformers (``AutoModelForMaskedLM`` and its tokenizer), never downloaded: a folder, or a
hub id already in the local Hugging Face cache (e.g. ``naver/splade-cocondenser-ensembledistil``, SPLADE++ ED).
Quantization (:data:`QUANTIZATION`): a weight ``w`` is stored as ``round(w * SCALE)``, weights that round to 0 are
dropped; queries are quantized the same way, so a passage's score is the integer sum over shared terms of query
weight x passage weight (Anserini's impact scoring: ``ImpactSimilarity``, term frequency x query boost).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.models import resolve_model
from ikatkit.placement import PlacedModel

DEFAULT_MODEL = "naver/splade-cocondenser-ensembledistil"
SCALE = 100
QUANTIZATION = f"round(weight * {SCALE}) as an integer (term frequency of the impact index); 0 dropped"
PASSAGE_LENGTH = 512  # tokens a passage is truncated to (BERT's limit)
QUERY_LENGTH = 128


def load_splade(name: str) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of masked-LM ``name`` (a folder, ``bundled:*`` or a hub id in the local cache), on the
    CPU in eval mode; one clear error when it cannot be loaded offline."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    path = resolve_model(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model, loading = AutoModelForMaskedLM.from_pretrained(path, local_files_only=True, output_loading_info=True)
    except (OSError, ValueError) as err:
        raise IkatError(f"SPLADE model {name!r} is not available offline: not a local folder, nor in the local Hugging "
                        f"Face cache ({type(err).__name__})",
                        fix=f"download it once where the network is allowed (`hf download {name}`, into the Hugging "
                            "Face cache ikatkit reads offline), or pass a local folder of a masked-LM model") from None
    head = [key for key in loading.get("missing_keys", ()) if not key.startswith(model.base_model_prefix + ".")]
    if head:
        raise IkatError(f"{name!r} has no masked-LM head (missing: {', '.join(sorted(head)[:3])}): it is not a SPLADE "
                        "model, and its term weights would come from random weights",
                        fix="pass a SPLADE checkpoint (a masked-LM, e.g. naver/splade-cocondenser-ensembledistil)")
    return tokenizer, model.eval()


class SparseEncoder(PlacedModel):
    """Quantized SPLADE vectors ``{term: weight}`` of texts, on ``device`` (default CPU) with ``threads`` CPU
    threads while encoding (default: as torch chooses), in ``dtype`` (``auto``: float32; ``ikatkit.placement``)."""

    kind = "splade"
    default_device = "cpu"

    def __init__(self, model: str, device: str | None = None, threads: int | None = None,
                 dtype: str = "auto") -> None:
        super().__init__(device, dtype, threads)
        self.name = model
        self.tokenizer, loaded = load_splade(model)
        self.model = self.placed(loaded)
        vocabulary = self.tokenizer.convert_ids_to_tokens(list(range(self.model.config.vocab_size)))
        self.terms = np.array(vocabulary, dtype=object)

    def weights(self, texts: list[str], max_length: int = PASSAGE_LENGTH) -> np.ndarray:
        """Float32 SPLADE weights, one row of vocabulary size per text (one forward pass: the caller batches)."""
        import torch

        found = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        found = {key: value.to(self.model.device) for key, value in found.items()}
        with torch.inference_mode(), self.computing():
            logits = self.model(**found).logits
            padding = found["attention_mask"].unsqueeze(-1) == 0
            # naver/splade's max(log(1 + relu(logits)) * mask), bit for bit (log(1 + x), not log1p: the organizers'
            # index and search compute it so), with the max taken first (log(1 + relu) is monotone) in less memory
            pooled = torch.log(1 + torch.relu(logits.masked_fill_(padding, 0).amax(dim=1)))
        return pooled.float().cpu().numpy()

    def encode(self, texts: list[str], batch_size: int = 8, max_length: int = PASSAGE_LENGTH) -> list[dict[str, int]]:
        """The quantized vector of each text, ``batch_size`` texts a forward pass (longest first: less padding)."""
        vectors: list[dict[str, int]] = [{} for _ in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            quantized = np.rint(self.weights([texts[i] for i in rows], max_length) * SCALE).astype(np.int64)
            for i, row in zip(rows, quantized):
                kept = np.flatnonzero(row > 0)
                vectors[i] = dict(zip(self.terms[kept].tolist(), row[kept].tolist()))
        return vectors

    def encode_queries(self, queries: list[str], batch_size: int = 32) -> list[dict[str, int]]:
        return self.encode(queries, batch_size, QUERY_LENGTH)

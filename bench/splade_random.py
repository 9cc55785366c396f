"""A random-weight SPLADE model of the real SPLADE++ shape (BERT-base masked LM, 30,522 terms) for tests and benches:
no SPLADE weights reach these machines and nothing is downloaded.

The tokenizer is the bundled all-MiniLM-L6-v2's (BERT uncased WordPiece, the same 30,522 terms as SPLADE++'s). The
weights are transformers' own random initialisation (seeded); only the MLM head's output bias is set, to
``BIAS``, so that about as few terms get a positive logit as a trained SPLADE keeps (a plain random model gives
most of the vocabulary a weight; a passage's vector would have thousands of terms, far denser than SPLADE++'s
100-200). Usage: ``python bench/splade_random.py OUT_FOLDER [--layers N]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

BIAS = -2.1  # the MLM head's output bias: ~300 terms a passage, ~15-30 a query at BERT-base (tests/test_splade.py)


def agreement(exact: list[dict[str, int]], near: list[dict[str, int]], queries: list[dict[str, int]]
              ) -> dict[str, float]:
    """How near quantized vectors ``near`` (e.g. bfloat16's) are to ``exact`` (float32's, the same texts): the mean
    Jaccard of the terms kept, the share of shared terms' weights equal and within 1, the largest difference, the L1
    of the differences relative to ``exact``'s total, and the mean overlap of the top 10 of ``queries`` by the dot
    product over these texts."""
    shared = [set(a) & set(b) for a, b in zip(exact, near)]
    differences = [abs(a[t] - b[t]) for a, b, terms in zip(exact, near, shared) for t in terms]

    def top10(vectors: list[dict[str, int]], query: dict[str, int]) -> set[int]:
        scores = [sum(w * vector.get(t, 0) for t, w in query.items()) for vector in vectors]
        return set(sorted(range(len(vectors)), key=lambda i: (-scores[i], i))[:10])

    l1 = sum(abs(a.get(t, 0) - b.get(t, 0)) for a, b in zip(exact, near) for t in set(a) | set(b))
    return {"terms_jaccard_mean": round(sum(len(s) / len(set(a) | set(b)) for a, b, s in zip(exact, near, shared))
                                        / len(exact), 4),
            "shared_weights_equal_share": round(sum(d == 0 for d in differences) / len(differences), 4),
            "shared_weights_within_1_share": round(sum(d <= 1 for d in differences) / len(differences), 4),
            "max_weight_difference": max(differences),
            "weight_l1_relative": round(l1 / sum(sum(a.values()) for a in exact), 4),
            "top10_overlap_mean": round(sum(len(top10(exact, q) & top10(near, q)) for q in queries)
                                        / (10 * len(queries)), 3)}


def random_splade(folder: Path, seed: int = 0, layers: int = 12, hidden: int = 768, bias: float = BIAS) -> Path:
    """Save the model (BERT-base with the defaults) and its tokenizer into ``folder`` (kept when already there)."""
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from ikatkit.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("bundled:minilm"))
    config = BertConfig(vocab_size=len(tokenizer), num_hidden_layers=layers, hidden_size=hidden,
                        num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden)
    torch.manual_seed(seed)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.fill_(bias)
    tmp = folder.with_name(f".{folder.name}.tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(folder)
    return folder


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(random_splade(args.out, args.seed, args.layers))

"""MiniLM fine-tuned on PTKB labels: a bi-encoder or a cross-encoder that scores (turn, statement) pairs.

Both start from the same weights as the ranker (``bundled:minilm``, all-MiniLM-L6-v2) and are trained on the
labelled (turn, statement) pairs (1: the turn's ``ptkb_provenance`` cites the statement) with a plain, seeded
PyTorch loop on the CPU in float32 on one thread (its placement, :class:`ikatkit.placement.PlacedModel`'s: the same
seed gives the same weights):

- ``bi``: the sentence-transformers model, trained so that the cosine of the turn text and the statement
  approaches the label (mean squared error, sentence-transformers' ``CosineSimilarityLoss``); the score is the
  cosine.
- ``cross``: a sequence classifier over the pair (the MiniLM encoder with a new one-logit head, seeded), trained
  with binary cross-entropy; the score is the sigmoid of its logit.

The turn text is the query, or with ``context`` the opening utterance and the earlier utterances before it
(the last :data:`CONTEXT_TURNS`), as a turn record carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ikatkit.errors import IkatError
from ikatkit.placement import PlacedModel, torch_threads

ARCHITECTURES = ("bi", "cross")
KINDS = {"bi": "bi-encoder", "cross": "cross-encoder"}  # each architecture's model kind (ikatkit.placement)
PLACEMENT = ("cpu", "float32", 1)  # device, dtype, threads: one seed gives one set of weights
CONTEXT_TURNS = 2
BATCH = 16
LEARNING_RATE = 2e-5
MAX_LENGTH = 256


def turn_text(query: str, utterances: Sequence[str], context: bool) -> str:
    """What the model reads of a turn: the query, or the opening and the last earlier utterances, then the query."""
    if not context or not utterances:
        return query
    earlier = list(dict.fromkeys([utterances[0], *utterances[-CONTEXT_TURNS:]]))
    return " | ".join([*earlier, query])


def _batches(n: int, epochs: int, seed: int) -> Iterator[list[int]]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator).tolist()
        for start in range(0, n, BATCH):
            yield order[start:start + BATCH]


class FineTuned(PlacedModel):
    """A fine-tuned scorer of (turn text, statement) pairs: :meth:`train` one, :meth:`save` / :meth:`load` it. Its
    placement: the CPU, float32, one thread (:data:`PLACEMENT`), trained and scored there whatever the machine has."""

    def __init__(self, architecture: str, model: Any, tokenizer: Any = None) -> None:
        self.kind = KINDS[architecture]
        super().__init__(*PLACEMENT)
        self.architecture = architecture
        self.model = self.placed(model)
        self.tokenizer = tokenizer

    @classmethod
    def train(cls, architecture: str, base: str, pairs: Sequence[tuple[str, str]], labels: Sequence[int],
              epochs: int, seed: int = 0,
              after_epoch: Callable[[int, FineTuned], None] | None = None) -> FineTuned:
        """``base`` (a path or ``bundled:*``) fine-tuned for ``epochs`` on ``pairs`` with ``labels`` (0 or 1);
        ``after_epoch(epoch, scorer)`` sees the model after each epoch (the first n epochs of a run are the run
        of n epochs: a constant learning rate and one seeded order of batches)."""
        import torch

        from ikatkit.models import resolve_model

        if architecture not in ARCHITECTURES:
            raise IkatError(f"unknown architecture {architecture!r}", fix=f"use one of {list(ARCHITECTURES)}")
        with torch_threads(PLACEMENT[2]), torch.random.fork_rng():
            torch.manual_seed(seed)  # the new head's weights and dropout
            if architecture == "bi":
                from sentence_transformers import SentenceTransformer

                scorer = cls("bi", SentenceTransformer(resolve_model(base), device=PLACEMENT[0],
                                                       local_files_only=True))
            else:
                from transformers import AutoModelForSequenceClassification, AutoTokenizer, logging

                path = resolve_model(base)
                verbosity = logging.get_verbosity()
                logging.set_verbosity_error()  # the new head's "newly initialized" warning is the point here
                try:
                    network = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
                finally:
                    logging.set_verbosity(verbosity)
                scorer = cls("cross", network, AutoTokenizer.from_pretrained(path))
            optimizer = torch.optim.AdamW(scorer.model.parameters(), lr=LEARNING_RATE)
            target = torch.tensor(labels, dtype=torch.float32)
            scorer.model.train()
            steps = -(-len(pairs) // BATCH)
            for step, batch in enumerate(_batches(len(pairs), epochs, seed), 1):
                optimizer.zero_grad()
                output = scorer._forward([pairs[i] for i in batch])
                if architecture == "bi":
                    loss = torch.nn.functional.mse_loss(output, target[batch])
                else:
                    loss = torch.nn.functional.binary_cross_entropy_with_logits(output, target[batch])
                loss.backward()
                optimizer.step()
                if after_epoch is not None and step % steps == 0:
                    scorer.model.eval()
                    after_epoch(step // steps, scorer)
                    scorer.model.train()
            scorer.model.eval()
        return scorer

    def _forward(self, pairs: Sequence[tuple[str, str]]) -> Any:
        """The pairs' cosines (bi) or logits (cross), with gradients where the model trains."""
        import torch

        if self.architecture == "bi":
            left, right = (self.model.preprocess([pair[side] for pair in pairs]) for side in (0, 1))
            a, b = (self.model(features)["sentence_embedding"] for features in (left, right))
            return torch.nn.functional.cosine_similarity(a, b)
        features = self.tokenizer([p[0] for p in pairs], [p[1] for p in pairs], padding=True, truncation=True,
                                  max_length=MAX_LENGTH, return_tensors="pt")
        return self.model(**features).logits.squeeze(-1)

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Each pair's score: the cosine (bi) or the probability (cross), one text or pair at a time (exact bits);
        the bi-encoder embeds each distinct text once (a turn's query is in every pair of the turn)."""
        import torch

        if not pairs:
            return np.zeros(0)
        with self.computing(), torch.inference_mode():
            if self.architecture == "bi":
                texts = list(dict.fromkeys(text for pair in pairs for text in pair))
                vectors = {t: self.model(self.model.preprocess([t]))["sentence_embedding"] for t in texts}
                values = torch.cat([torch.nn.functional.cosine_similarity(vectors[a], vectors[b]) for a, b in pairs])
            else:
                values = torch.sigmoid(torch.cat([self._forward([pair]) for pair in pairs]))
        return values.double().numpy()

    def save(self, folder: str | Path) -> None:
        """The model's files in ``folder`` (made anew)."""
        if self.architecture == "bi":
            self.model.save(str(folder))
        else:
            self.model.save_pretrained(str(folder))
            self.tokenizer.save_pretrained(str(folder))

    @classmethod
    def load(cls, architecture: str, folder: str | Path) -> FineTuned:
        """The model saved in ``folder``; a missing or unreadable one is one IkatError."""
        fix = "retrain it with `ikatkit train-ptkb-classifier TOPICS --finetune bi|cross --out FILE`"
        if not Path(folder, "config.json").is_file():
            raise IkatError("the fine-tuned model's files are missing", path=folder, fix=fix)
        try:
            if architecture == "bi":
                from sentence_transformers import SentenceTransformer

                return cls("bi", SentenceTransformer(str(folder), device=PLACEMENT[0], local_files_only=True))
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            network = AutoModelForSequenceClassification.from_pretrained(str(folder), local_files_only=True)
            return cls("cross", network.eval(), AutoTokenizer.from_pretrained(str(folder), local_files_only=True))
        except (OSError, ValueError, KeyError, RuntimeError) as err:
            raise IkatError(f"cannot load the fine-tuned model ({type(err).__name__}: {str(err)[:200]})",
                            path=folder, fix=fix) from None

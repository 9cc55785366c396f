"""Response evaluation: generated responses scored against references, grounding passages and gold nuggets.

The scorer API other stages import (all batch functions over parallel lists; each returns values aligned
with its inputs, models loaded once per object)::

    from ikatkit.evaluate.responses import (BertScore, Embedder, citation_coverage, k_precision, rouge,
                                            rouge_l_grounding, token_recall, tokenize)

    rouge(responses, references)            # {"rouge1_f": [...], "rouge1_r", "rouge1_p", "rouge2_*", "rougeL_*"}
    bleu(responses, references)             # [sentence BLEU 0-100, sacrebleu]
    token_recall(responses, references)     # [share of reference tokens in the response]
    k_precision(responses, passages)        # [share of response tokens in its passages]; passages: list[list[str]]
    rouge_l_grounding(responses, passages)  # [ROUGE-L precision against the joined passages]
    bert = BertScore("bundled:minilm", layer=None)   # bert.label == "all-MiniLM-L6-v2:L6"
    bert.score(responses, references)       # {"precision": [...], "recall": [...], "f1": [...]}
    bert.k_precision(responses, passages)   # [BERTScore precision against the best passage]
    emb = Embedder("bundled:minilm")
    emb.similarity(responses, references)   # [cosine of sentence embeddings]
    citation_coverage(emb, responses, passages, threshold)  # [share of sentences a passage supports]

Token measures share one tokenizer (:func:`tokenize`: rouge-score's, lower case, ``[a-z0-9]+``, no stemming).

Whole runs: ``evaluate.evaluate_responses(run, topics=..., references=..., nuggets=..., passages=...,
measures=[...])`` returns an ``EvalResult`` (``evaluate_response_runs`` for several runs sharing one
``ResponseScorers``); the measures are declared in :mod:`measures`, the readers in :mod:`data`, nugget matchers
(embedding, LLM judge) and AutoNuggetizer scores in :mod:`nuggets`.
"""

from ikatkit.evaluate.responses.scorers import (DEFAULT_MODEL, ROUGE_TYPES, BertScore, Embedder, Scores, bleu,
                                                citation_coverage, k_precision, model_label, rouge,
                                                rouge_l_grounding, sentences, shared_embedder, token_recall,
                                                tokenize)

__all__ = ["DEFAULT_MODEL", "ROUGE_TYPES", "BertScore", "Embedder", "Scores", "bleu", "citation_coverage",
           "k_precision",
           "model_label", "rouge", "rouge_l_grounding", "sentences", "shared_embedder", "token_recall", "tokenize"]

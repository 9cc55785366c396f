"""Random-weight models of the real shapes, built locally (nothing is downloaded): MiniLM bi- and cross-encoders and a
SPLADE++-shaped BERT-base masked LM with a WordPiece tokenizer over a made-up vocabulary, Llama decoders with a
word-level tokenizer and a chat template. Their outputs mean nothing; their compute is that of the real models
(bench/gpu/run.py, the tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORDS = [f"w{i}" for i in range(4000)] + ("lentils tofu beans marathon runner protein iron vitamin training "
                                          "recovery diet plan meal energy").split()
BERT_BASE = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
             "vocab_size": 30522, "max_position_embeddings": 512}  # SPLADE++'s encoder (bench/splade_random.py)
MINILM = {"hidden_size": 384, "intermediate_size": 1536, "num_attention_heads": 12, "vocab_size": 30522,
          "max_position_embeddings": 512}
LLAMA = {"llama-2-7b": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000},
         "llama-3-8b": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256},
         "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 4200}}
CHAT = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<assistant> {% endif %}")


def word_tokenizer() -> Any:
    """A word-level tokenizer (``WORDS``, roles, specials) with a chat template, as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>", "<pad>", "<system>", "<user>", "<assistant>",
                                          *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>")
    tokenizer.chat_template = CHAT
    return tokenizer


def llama(folder: Path, shape: str, dtype: Any = None, device: str = "cpu", seed: int = 0) -> Path:
    """A random-weight Llama of ``shape`` (a ``LLAMA`` key) saved with ``word_tokenizer`` into ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = word_tokenizer()
    config = LlamaConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, max_position_embeddings=4096, **LLAMA[shape])
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(folder, max_shard_size="5GB")
    tokenizer.save_pretrained(folder)
    return folder


def bert_tokenizer(folder: Path) -> Any:
    """A WordPiece tokenizer over ``WORDS`` and single letters, saved into ``folder``."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, *(f"##{c}" for c in letters), *WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(folder)
    return tokenizer


def minilm(folder: Path, kind: str, layers: int = 6, seed: int = 0) -> Path:
    """A random-weight MiniLM of ``layers`` layers: ``bi`` a sentence-transformers model (mean pooling,
    normalised, 256 tokens), ``cross`` a one-label sequence classifier (a cross-encoder)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    bert_tokenizer(folder)
    torch.manual_seed(seed)
    if kind == "cross":
        BertForSequenceClassification(BertConfig(num_hidden_layers=layers, num_labels=1, **MINILM)) \
            .save_pretrained(folder)
        return folder
    from sentence_transformers import SentenceTransformer, models

    BertModel(BertConfig(num_hidden_layers=layers, **MINILM)).save_pretrained(folder / "bert")
    bert_tokenizer(folder / "bert")
    transformer = models.Transformer(str(folder / "bert"), max_seq_length=256)
    pooling = models.Pooling(MINILM["hidden_size"], pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu").save(str(folder / "st"))
    return folder / "st"


def passages(count: int, words: int = 110, seed: int = 0) -> list[str]:
    """``count`` passages of ``words`` words drawn from ``WORDS`` (lengths vary a little: 0.8-1.0 of ``words``)."""
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(words * 4 // 5, words))) for _ in range(count)]


def splade(folder: Path, seed: int = 0, layers: int = 12) -> Path:
    """A random-weight BERT-base masked LM (SPLADE++'s shape, 30,522 terms; ``layers`` fewer only to rehearse) with
    ``bert_tokenizer``; its output bias set as bench/splade_random.py sets it, so vectors are about as sparse as
    SPLADE++'s."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from splade_random import BIAS

    bert_tokenizer(folder)
    torch.manual_seed(seed)
    model = BertForMaskedLM(BertConfig(**{**BERT_BASE, "num_hidden_layers": layers})).eval()
    with torch.no_grad():
        model.cls.predictions.bias.fill_(BIAS)
    model.save_pretrained(folder)
    return folder

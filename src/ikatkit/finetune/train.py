"""LoRA fine-tuning with peft (QLoRA: a 4-bit base, when a GPU is present), loss on the target tokens only.

Defaults are the seed paper's: lr 1e-4, r 64, alpha 16, dropout 0.1, batch 128 by gradient accumulation,
adapters on all linear layers, 100 steps.
"""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ikatkit.atomic import write_json
from ikatkit.finetune.data import Example


@dataclass
class TrainSettings:
    model: str = "bundled:smollm2"
    steps: int = 100
    batch_size: int = 128
    micro_batch: int = 4
    lr: float = 1e-4
    r: int = 64
    alpha: int = 16
    dropout: float = 0.1
    max_length: int = 512
    seed: int = 0


def _tensors(tokenizer: Any, example: Example, max_length: int) -> tuple[list[int], list[int]]:
    """input ids and labels: the prompt masked with -100, the target (and EOS) learned."""
    prompt = tokenizer.apply_chat_template(example.messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    target_ids = tokenizer(example.target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    prompt_ids = prompt_ids[-max(1, max_length - len(target_ids)):]
    ids = (prompt_ids + target_ids)[:max_length]
    labels = ([-100] * len(prompt_ids) + target_ids)[:max_length]
    return ids, labels


def train_lora(examples: list[Example], out: str | Path, settings: TrainSettings | None = None) -> dict[str, Any]:
    """Train a LoRA adapter on ``examples`` and save it (with ``training.json``) atomically into ``out``."""
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    from ikatkit.llm.hf import load_model

    settings = settings or TrainSettings()
    torch.manual_seed(settings.seed)
    gpu = torch.cuda.is_available()
    tokenizer, model = load_model(settings.model, quantization="4bit" if gpu else None)
    if gpu:
        model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.lr)
    encoded = [_tensors(tokenizer, e, settings.max_length) for e in examples]
    order: list[int] = []
    rng = random.Random(settings.seed)
    losses: list[float] = []
    started = time.time()
    for _ in tqdm(range(settings.steps), desc="LoRA steps", unit="step"):
        optimizer.zero_grad()
        batch = []
        for _ in range(settings.batch_size):
            if not order:
                order = list(range(len(encoded)))
                rng.shuffle(order)
            batch.append(encoded[order.pop()])
        total, tokens = 0.0, sum(sum(label != -100 for label in labels) for _, labels in batch)
        for start in range(0, len(batch), settings.micro_batch):
            chunk = batch[start: start + settings.micro_batch]
            width = max(len(ids) for ids, _ in chunk)
            pad = tokenizer.pad_token_id
            input_ids = torch.tensor([[pad] * (width - len(i)) + i for i, _ in chunk], device=model.device)
            labels = torch.tensor([[-100] * (width - len(lab)) + lab for _, lab in chunk], device=model.device)
            mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i, _ in chunk], device=model.device)
            logits = model(input_ids=input_ids, attention_mask=mask).logits[:, :-1]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                     labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum")
            (loss / tokens).backward()
            total += float(loss)
        optimizer.step()
        losses.append(total / tokens)
    out = Path(out)
    work = out.parent / f".{out.name}.training"
    shutil.rmtree(work, ignore_errors=True)
    model.save_pretrained(str(work))
    manifest = {"settings": asdict(settings), "qlora": gpu, "examples": len(examples),
                "tasks": {t: sum(e.task == t for e in examples) for t in sorted({e.task for e in examples})},
                "losses": losses, "seconds": round(time.time() - started, 1)}
    write_json(work / "training.json", manifest)
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    print(f"trained {settings.steps} steps on {len(examples)} examples: loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
          f"adapter in {out}")
    return manifest

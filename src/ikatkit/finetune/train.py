"""LoRA fine-tuning with peft (QLoRA: a 4-bit base, when a GPU is present), loss on the target tokens only.

Defaults are the seed paper's: lr 1e-4, r 64, alpha 16, dropout 0.1, batch 128 by gradient accumulation,
adapters on all linear layers, 100 steps.

Training resumes: every ``checkpoint_every`` steps the adapter's weights, the optimizer's state, the random states
(the example order's and torch's, which drives dropout) and the losses so far are saved atomically to
``.OUT.checkpoint.pt`` beside the adapter folder, under a fingerprint of what changes them (the settings, the
base model's content, the examples, QLoRA or not). A stopped training (:mod:`ikatkit.stopping`) run again goes on
from the last checkpoint's step, to the adapter an uninterrupted training writes; a checkpoint of other inputs is
refused (``restart`` discards it). ``.OUT.lock`` keeps a second training off the same checkpoint.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ikatkit.atomic import atomic_open, write_folder, write_json
from ikatkit.errors import IkatError
from ikatkit.finetune.data import Example
from ikatkit.lock import locked


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


def checkpoint_path(out: str | Path) -> Path:
    """Where a training into ``out`` keeps its checkpoint: ``.OUT.checkpoint.pt`` beside it."""
    out = Path(out)
    return out.parent / f".{out.name}.checkpoint.pt"


def _fingerprint(examples: list[Example], settings: TrainSettings, qlora: bool) -> dict[str, str]:
    """A digest per input that changes the training (a refused resume names what changed)."""
    from ikatkit.digest import json_digest
    from ikatkit.paths import cache_root
    from ikatkit.pipelines.fingerprint import model_identity

    return {"settings": json_digest(asdict(settings)),
            "model": model_identity(settings.model, cache_root() / "digests"),
            "examples": json_digest([[e.qid, e.task, e.messages, e.target] for e in examples]),
            "qlora": str(qlora)}


def _resumed(path: Path, parts: dict[str, str], restart: bool) -> dict[str, Any] | None:
    """The checkpoint to go on from: None if there is none (or ``restart``); one of other inputs is refused."""
    import torch

    if restart:
        path.unlink(missing_ok=True)
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    changed = [key for key, value in parts.items() if state["fingerprint"].get(key) != value]
    if changed:
        raise IkatError(f"the training checkpoint belongs to another {', '.join(changed)}", path=path,
                        fix="use another --out, or pass --restart to discard it")
    return state


def train_lora(examples: list[Example], out: str | Path, settings: TrainSettings | None = None, *,
               checkpoint_every: int = 10, restart: bool = False) -> dict[str, Any]:
    """Train a LoRA adapter on ``examples`` and save it (with ``training.json``) atomically into ``out``; go on
    from the checkpoint of a stopped training of the same inputs (see the module docstring)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked(out.parent / f".{out.name}.lock", "another training ({holder}) is writing this adapter", where=out,
                fix="wait for it to end, or stop it"):
        return _train(examples, out, settings or TrainSettings(), checkpoint_every, restart)


def _train(examples: list[Example], out: Path, settings: TrainSettings, checkpoint_every: int,
           restart: bool) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    from ikatkit.llm.hf import load_model
    from ikatkit.placement import decide, machine

    if checkpoint_every < 1:
        raise IkatError(f"checkpoint_every = {checkpoint_every}", where="--checkpoint-every", fix="pass 1 or more")
    torch.manual_seed(settings.seed)
    placement = decide("llm", machine())  # where the base model runs: a GPU trains QLoRA (4-bit), a CPU float32
    gpu = placement.device != "cpu"
    parts = _fingerprint(examples, settings, gpu)
    saved = checkpoint_path(out)
    state = _resumed(saved, parts, restart)
    tokenizer, model = load_model(settings.model, quantization="4bit" if gpu else None, placement=placement)
    if gpu:
        model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    model.train()
    trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
    optimizer = torch.optim.AdamW(list(trained.values()), lr=settings.lr)
    encoded = [_tensors(tokenizer, e, settings.max_length) for e in examples]
    order: list[int] = []
    rng = random.Random(settings.seed)
    losses: list[float] = []
    done, spent = 0, 0.0
    if state is not None:
        with torch.no_grad():
            for name, value in state["adapter"].items():
                trained[name].copy_(value)
        optimizer.load_state_dict(state["optimizer"])
        rng.setstate((state["rng"][0], tuple(state["rng"][1]), state["rng"][2]))
        torch.set_rng_state(state["torch_rng"])
        if gpu:
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        order, losses, done, spent = list(state["order"]), list(state["losses"]), state["step"], state["seconds"]
        print(f"resuming at step {done} of {settings.steps} from {saved}")
    started = time.time()
    for step in tqdm(range(done, settings.steps), desc="LoRA steps", unit="step", initial=done,
                     total=settings.steps):
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
            total += float(loss.detach())
        optimizer.step()
        losses.append(total / tokens)
        if (step + 1) % checkpoint_every == 0 and step + 1 < settings.steps:
            with atomic_open(saved, "wb") as handle:
                torch.save({"fingerprint": parts, "step": step + 1, "losses": losses, "order": order,
                            "adapter": {name: p.detach().cpu() for name, p in trained.items()},
                            "optimizer": optimizer.state_dict(), "rng": rng.getstate(),
                            "torch_rng": torch.get_rng_state(),
                            "cuda_rng": torch.cuda.get_rng_state_all() if gpu else [],
                            "seconds": spent + time.time() - started}, handle)
    manifest = {"settings": asdict(settings), "qlora": gpu, "examples": len(examples),
                "tasks": {t: sum(e.task == t for e in examples) for t in sorted({e.task for e in examples})},
                "losses": losses, "resumed_from": done, "seconds": round(spent + time.time() - started, 1)}

    def fill(folder: Path) -> None:
        model.save_pretrained(str(folder))
        write_json(folder / "training.json", manifest)

    write_folder(out, fill)
    saved.unlink(missing_ok=True)
    print(f"trained {settings.steps} steps on {len(examples)} examples: loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
          f"adapter in {out}")
    return manifest

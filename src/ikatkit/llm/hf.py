"""Local Hugging Face transformers backend: any model id or path, GGUF files, LoRA adapters, 4/8-bit on GPU."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM, Messages
from ikatkit.models import resolve_model
from ikatkit.placement import Placement, decide, machine

QUANTIZATIONS = ("4bit", "8bit")
DECODINGS = ("auto", "eager", "static")


def split_gguf(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(folder or hub id, GGUF file name or None) for ``model`` (``bundled:*`` resolved; a ``.gguf`` path split)."""
    path = resolve_model(model)
    if gguf_file is None and path.endswith(".gguf"):
        return str(Path(path).parent), Path(path).name
    return path, gguf_file


def load_model(model: str, adapter: str | None = None, quantization: str | None = None,
               gguf_file: str | None = None, placement: Placement | None = None) -> tuple[Any, Any]:
    """(tokenizer, model in eval mode): ``load_base``'s, with the LoRA ``adapter`` folder on it if given."""
    if adapter and not Path(adapter, "adapter_config.json").exists():
        raise IkatError("not a LoRA adapter folder (adapter_config.json missing)", path=adapter,
                        fix="pass the --out folder of `ikatkit finetune train`")
    tokenizer, network = load_base(model, quantization, gguf_file, placement)
    if adapter:
        from peft import PeftModel

        network = PeftModel.from_pretrained(network, adapter)
    network.eval()
    return tokenizer, network


def load_base(model: str, quantization: str | None = None, gguf_file: str | None = None,
              placement: Placement | None = None) -> tuple[Any, Any]:
    """(tokenizer, model) for a hub id, a folder, or a ``.gguf`` file (dequantized by transformers).

    The weights are in ``placement``'s dtype on its device (default: ``ikatkit.placement.decide``'s, float16 on a
    GPU, float32 on a CPU), or 4/8-bit with bitsandbytes when ``quantization`` is set (CUDA only).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, gguf_file = split_gguf(model, gguf_file)
    if gguf_file and not Path(path, gguf_file).exists() and Path(path).is_dir():
        raise IkatError(f"GGUF file {gguf_file!r} not found", path=path, fix="set gguf_file to a file in that folder")
    files: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    kwargs: dict[str, Any] = dict(files)
    if quantization:
        if quantization not in QUANTIZATIONS:
            raise IkatError(f"unknown quantization {quantization!r}", where="llm.quantization",
                            fix=f"use one of {QUANTIZATIONS} or leave it out")
        if machine().device != "cuda":
            raise IkatError(f"{quantization} quantization needs a CUDA GPU (bitsandbytes)", where="llm.quantization",
                            fix="drop `quantization` from the config on a CPU machine")
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=quantization == "4bit", load_in_8bit=quantization == "8bit",
            bnb_4bit_compute_dtype=torch.float16)
        kwargs["device_map"] = "auto"
    else:
        placement = placement or decide("llm", machine())
        kwargs["dtype"] = placement.torch_dtype
        if placement.device != "cpu":
            kwargs["device_map"] = "auto"
    tokenizer = AutoTokenizer.from_pretrained(path, **files)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, AutoModelForCausalLM.from_pretrained(path, **kwargs)


class StopInReply:
    """A stopping criterion: a row is done once its reply (the tokens after the prompt) contains a stop string.

    transformers' own ``stop_strings`` also match across the prompt's end: the chat template ends in a new line,
    so a reply opening with ``User:`` would stop at once on ``\nUser:``."""

    def __init__(self, tokenizer: Any, stop: Sequence[str], width: int) -> None:
        self.tokenizer, self.stop, self.width = tokenizer, [s for s in stop if s], width

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        replies = self.tokenizer.batch_decode(input_ids[:, self.width:], skip_special_tokens=True)
        return torch.tensor([any(s in reply for s in self.stop) for reply in replies], device=input_ids.device)


class TransformersLLM(LLM):
    """Batched generation (left padding; greedy, or seeded sampling per row) with the model's chat template.

    ``device`` and ``dtype`` place the model (``ikatkit.placement``: float16 on CUDA, float32 on the CPU).
    ``decoding``: ``eager`` (transformers' dynamic KV cache), ``static`` (a static KV cache, which transformers
    decodes with a compiled forward on CUDA), or ``auto``: static on CUDA, eager on the CPU. Which is faster on a
    GPU waits for a measurement (bench/gpu/run.py); the static path's logits equal the eager path's within float
    error and its greedy tokens are the same (tests/test_gpu_paths.py).
    """

    backend = "transformers"

    def __init__(self, model: str, *, adapter: str | None = None, quantization: str | None = None,
                 gguf_file: str | None = None, batch_size: int = 8, device: str | None = None,
                 dtype: str = "auto", decoding: str = "auto", **options: Any) -> None:
        super().__init__(model, adapter=adapter, **options)
        self.quantization, self.gguf_file = quantization, gguf_file
        self.placement = decide("llm", machine(device), dtype)
        if decoding not in DECODINGS:
            raise IkatError(f"unknown decoding {decoding!r}", where="llm.decoding", fix=f"use one of {DECODINGS}")
        self.decoding = decoding if decoding != "auto" else ("eager" if self.placement.device == "cpu" else "static")
        self.tokenizer, self.network = load_model(model, adapter, quantization, gguf_file, self.placement)
        self.batch_size = batch_size

    def identity(self) -> dict[str, Any]:
        """Quantization, GGUF file, and where the model runs in which dtype: a CPU run's outputs never serve a GPU
        run's cache entries, nor float16's bfloat16's."""
        return {"quantization": self.quantization, "gguf_file": self.gguf_file, **self.placement.identity(),
                **({"decoding": self.decoding} if self.decoding != "eager" else {})}

    def decoding_options(self) -> dict[str, Any]:
        """What ``generate`` is given for the chosen ``decoding``."""
        return {"cache_implementation": "static"} if self.decoding == "static" else {}

    def prompt_text(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _generate(self, batch: list[Messages], params: dict[str, Any],
                  seeds: list[int] | None = None) -> Iterator[tuple[str, int, int]]:
        """The rows ``batch_size`` at a time, each batch's rows yielded (and so cached) as it is done."""
        import torch
        from transformers import LogitsProcessorList

        greedy = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        for start in range(0, len(batch), self.batch_size):
            texts = [self.prompt_text(m) for m in batch[start: start + self.batch_size]]
            inputs = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            inputs = inputs.to(self.network.device)
            processors = LogitsProcessorList(
                [SeededSampler(params, seeds[start: start + self.batch_size])] if seeds is not None else [])
            with torch.no_grad():
                width = inputs["input_ids"].shape[1]
                stop = {"stopping_criteria": [StopInReply(self.tokenizer, params["stop"], width)]} \
                    if params.get("stop") else {}
                output = self.network.generate(**inputs, max_new_tokens=params["max_new_tokens"],
                                               pad_token_id=self.tokenizer.pad_token_id,
                                               logits_processor=processors, **greedy, **stop,
                                               **self.decoding_options())
            for row, mask in zip(output, inputs["attention_mask"]):
                new = row[width:]
                new = new[new != self.tokenizer.pad_token_id]
                yield (self.tokenizer.decode(new, skip_special_tokens=True).strip(), int(mask.sum()), int(len(new)))


class SeededSampler:
    """Sampling with one random generator per row: temperature, top-k and top-p (transformers' warpers), then
    Gumbel noise from the row's own generator, so that the argmax (greedy search) is a sample of the warped
    distribution (the Gumbel-max trick) that depends on the row's seed and step only, never on the other rows."""

    def __init__(self, params: dict[str, Any], seeds: list[int]) -> None:
        import torch
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.warpers: list[Any] = [TemperatureLogitsWarper(params["temperature"])]
        if params["top_k"] > 0:
            self.warpers.append(TopKLogitsWarper(params["top_k"]))
        if params["top_p"] < 1:
            self.warpers.append(TopPLogitsWarper(params["top_p"]))
        self.generators = [torch.Generator().manual_seed(seed) for seed in seeds]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        scores = scores.float()
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        uniform = torch.stack([torch.rand(scores.shape[1], generator=g) for g in self.generators])
        gumbel = -torch.log(-torch.log(uniform.clamp(1e-20, 1 - 1e-7)))
        return scores + gumbel.to(scores.device)

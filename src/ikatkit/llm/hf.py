"""Local Hugging Face transformers backend: any model id or path, GGUF files, LoRA adapters, 4/8-bit on GPU."""

from __future__ import annotations

from pathlib import Path

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM, Messages
from ikatkit.models import resolve_model


def load_model(model: str, adapter: str | None = None, quantization: str | None = None):  # type: ignore[no-untyped-def]
    """(tokenizer, model) for a hub id, a folder, or a ``.gguf`` file (dequantized by transformers)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(model)
    kwargs: dict = {}
    if path.endswith(".gguf"):
        kwargs["gguf_file"] = Path(path).name
        path = str(Path(path).parent)
    if quantization:
        if not torch.cuda.is_available():
            raise IkatError(f"{quantization} quantization needs a CUDA GPU (bitsandbytes)",
                            fix="drop `quantization` from the config on a CPU machine")
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=quantization == "4bit", load_in_8bit=quantization == "8bit",
            bnb_4bit_compute_dtype=torch.float16)
        kwargs["device_map"] = "auto"
    elif torch.cuda.is_available():
        kwargs["torch_dtype"] = torch.float16
        kwargs["device_map"] = "auto"
    tokenizer = AutoTokenizer.from_pretrained(path, **{k: v for k, v in kwargs.items() if k == "gguf_file"})
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    network = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if adapter:
        from peft import PeftModel

        if not Path(adapter, "adapter_config.json").exists():
            raise IkatError("not a LoRA adapter folder (adapter_config.json missing)", path=adapter,
                            fix="pass the --out folder of `ikatkit finetune train`")
        network = PeftModel.from_pretrained(network, adapter)
    network.eval()
    return tokenizer, network


class TransformersLLM(LLM):
    """Batched greedy generation (left padding) with the model's chat template."""

    backend = "transformers"

    def __init__(self, model: str, *, adapter: str | None = None, quantization: str | None = None,
                 batch_size: int = 8, **options) -> None:  # type: ignore[no-untyped-def]
        super().__init__(model, adapter=adapter, **options)
        self.tokenizer, self.network = load_model(model, adapter, quantization)
        self.batch_size = batch_size

    def prompt_text(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _generate(self, batch: list[Messages]) -> list[tuple[str, int, int]]:
        import torch

        results: list[tuple[str, int, int]] = []
        for start in range(0, len(batch), self.batch_size):
            texts = [self.prompt_text(m) for m in batch[start: start + self.batch_size]]
            inputs = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            inputs = inputs.to(self.network.device)
            sampling = {"do_sample": True, "temperature": self.temperature} if self.temperature > 0 else {
                "do_sample": False}
            with torch.no_grad():
                output = self.network.generate(**inputs, max_new_tokens=self.max_new_tokens,
                                               pad_token_id=self.tokenizer.pad_token_id, **sampling)
            width = inputs["input_ids"].shape[1]
            for row, mask in zip(output, inputs["attention_mask"]):
                new = row[width:]
                new = new[new != self.tokenizer.pad_token_id]
                results.append((self.tokenizer.decode(new, skip_special_tokens=True).strip(),
                                int(mask.sum()), int(len(new))))
        return results

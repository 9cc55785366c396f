"""Where a model runs, in which dtype, and how exact its outputs are promised to be: one decision that the
encoders, rankers and the LLM backend share (``decide``), and part of every cache identity it affects
(``Placement.identity``), so a CPU cache never serves a GPU run nor a float16 one a float32 run.

On the CPU every kind runs in float32 and the bi-encoder's embeddings are bit-identical whatever they are batched
with (``tolerance`` None: ``rank.biencoder`` checks each batch shape it uses). On CUDA, batches are large and
padded, and the dtype is the kind's (``CUDA_DTYPE``): float32 for the bi-encoder ranker (its scores within 1e-4 of
batch-1 float32) and the SPLADE encoder, float16 for the dense encoder (the issue's goal: cosine >= 0.999 with
float32), the cross-encoder and the LLM. ``tolerance`` is what the dtype promises (``TOLERANCE``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ikatkit.errors import IkatError

DTYPES = ("auto", "float32", "float16", "bfloat16")
CUDA_DTYPE = {"bi-encoder": "float32", "encoder": "float16", "cross-encoder": "float16", "llm": "float16",
              "splade": "float32"}
# SPLADE stays float32 on CUDA until a GPU run measures what half precision does to its quantized weights
# (bench/gpu/run.py's splade part measures float16 beside it); float16/bfloat16 are options (`index sparse --dtype`)
# dtype -> the largest difference from batch-1 float32 outputs promised (an embedding's components, a score, a logit
# relative to the logits' spread): float32's from batching alone, the half precisions' from their 8 or 11 bits
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}


@dataclass(frozen=True)
class Machine:
    """What a device offers: its type (``cpu`` or ``cuda``), a name, and whether it computes bfloat16 (PyTorch does on
    every x86-64 CPU; a GPU before Ampere does not)."""

    device: str
    name: str = "cpu"
    bf16: bool = True


def machine(device: str | None = None) -> Machine:
    """The machine of ``device`` (``cpu``, ``cuda``, ``cuda:N``; None: CUDA where visible, else the CPU)."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kind = device.split(":")[0]
    if kind == "cpu":
        return Machine("cpu")  # bfloat16: natively with AVX-512 BF16 or AMX, else emulated by PyTorch
    if kind != "cuda":
        raise IkatError(f"unsupported device {device!r}", where="device", fix="use cpu or cuda (cuda:N)")
    if not torch.cuda.is_available():
        raise IkatError(f"device {device!r} asked for, but PyTorch sees no CUDA GPU", where="device",
                        fix="leave device out (the CPU is used), or install a CUDA build of PyTorch")
    index = torch.device(device).index or 0
    return Machine("cuda", torch.cuda.get_device_name(index), bool(torch.cuda.is_bf16_supported()))


@dataclass(frozen=True)
class Placement:
    """``device`` type, ``dtype`` name, and ``tolerance``: None where outputs are the same bits whatever the
    batch, else the largest difference from batch-1 float32 outputs promised (``TOLERANCE``)."""

    device: str
    dtype: str
    tolerance: float | None

    def identity(self) -> dict[str, Any]:
        """What a cache key or fingerprint records of the placement."""
        return {"device": self.device, "dtype": self.dtype, "tolerance": self.tolerance}

    @property
    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, self.dtype)


def decide(kind: str, where: Machine, dtype: str = "auto") -> Placement:
    """The placement of a model of ``kind`` (a ``CUDA_DTYPE`` key) on ``where``; ``dtype`` overrides the choice
    (``auto``: float32 on the CPU, the kind's dtype on CUDA; for bfloat16 where the machine lacks it: float16 on a
    GPU, float32 on a CPU)."""
    if kind not in CUDA_DTYPE:
        raise ValueError(f"unknown model kind {kind!r}")
    if dtype not in DTYPES:
        raise IkatError(f"unknown dtype {dtype!r}", where="dtype", fix=f"use one of {list(DTYPES)}")
    if where.device == "cpu":
        chosen = "float32" if dtype == "auto" or (dtype == "bfloat16" and not where.bf16) else dtype
        if chosen == "float16":
            raise IkatError("float16 is not computed on the CPU", where="dtype",
                            fix="use bfloat16 or float32 (the default) on a CPU")
        exact = kind == "bi-encoder" and chosen == "float32"
        return Placement("cpu", chosen, None if exact else TOLERANCE[chosen])
    chosen = CUDA_DTYPE[kind] if dtype == "auto" else dtype
    if chosen == "bfloat16" and not where.bf16:
        chosen = "float16"
    return Placement(where.device, chosen, TOLERANCE[chosen])


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """PyTorch's CPU threads set to ``threads`` for the block and restored after it (None: left as they are): the one
    place ikatkit sets them, never process-wide."""
    if not threads:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class PlacedModel:
    """The base of every model ikatkit runs (encoders, rankers): where it runs, in which dtype and on how many CPU
    threads, decided once here for the model's ``kind`` (a :data:`CUDA_DTYPE` key) on its own machine.

    ``device``: ``cpu``, ``cuda``, ``cuda:N`` (None: CUDA where visible, else the CPU, or ``default_device``);
    ``dtype``: ``auto`` or one of :data:`DTYPES`; ``threads``: PyTorch's CPU threads while the model computes
    (:meth:`computing`; None: as they are)."""

    kind: str = ""
    default_device: str | None = None

    def __init__(self, device: str | None = None, dtype: str = "auto", threads: int | None = None) -> None:
        self.placement = decide(self.kind, machine(device or self.default_device), dtype)
        self.device = device or self.default_device or self.placement.device
        self.threads = threads

    def placed(self, model: Any) -> Any:
        """``model`` (a torch module) on this placement's device, cast to its dtype unless float32."""
        model = model.to(self.device)
        return model if self.placement.dtype == "float32" else model.to(self.placement.torch_dtype)

    def computing(self) -> contextlib.AbstractContextManager[None]:
        """The block in which the model computes: PyTorch on this model's ``threads``, restored after."""
        return torch_threads(self.threads)

    def ran(self, batch_size: int) -> dict[str, Any]:
        """What a job records of where this model ran: the placement and the batch size."""
        return {**self.placement.identity(), "batch_size": batch_size}

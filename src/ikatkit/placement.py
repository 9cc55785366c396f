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
    """What a device offers: its type (``cpu`` or ``cuda``), a name, and whether it computes bfloat16 natively."""

    device: str
    name: str = "cpu"
    bf16: bool = False


def machine(device: str | None = None) -> Machine:
    """The machine of ``device`` (``cpu``, ``cuda``, ``cuda:N``; None: CUDA where visible, else the CPU)."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kind = device.split(":")[0]
    if kind == "cpu":
        return Machine("cpu")
    if kind != "cuda":
        raise IkatError(f"unsupported device {device!r}", where="device", fix="use cpu or cuda (cuda:N)")
    if not torch.cuda.is_available():
        raise IkatError(f"device {device!r} asked for, but PyTorch sees no CUDA GPU", where="device",
                        fix="leave device out (the CPU is used), or install a CUDA build of PyTorch")
    index = torch.device(device).index or 0
    return Machine("cuda", torch.cuda.get_device_name(index), bool(torch.cuda.is_bf16_supported()))


def ray_machine(gpus: int) -> Machine:
    """The machine a Ray job's encoder actors run on, as the driver can tell (``index dense``, ``index sparse``):
    the CPU without GPUs; with GPUs, this process's own GPU where it sees one, else a GPU with bfloat16 (as every GPU
    since Ampere has), so that an asked bfloat16 is not turned into float16 for want of a GPU here."""
    import torch

    if not gpus:
        return Machine("cpu")
    return machine("cuda") if torch.cuda.is_available() else Machine("cuda", "a GPU of the Ray cluster", bf16=True)


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
    (``auto``: float32 on the CPU, the kind's dtype on CUDA; float16 for bfloat16 where the GPU lacks it)."""
    if kind not in CUDA_DTYPE:
        raise ValueError(f"unknown model kind {kind!r}")
    if dtype not in DTYPES:
        raise IkatError(f"unknown dtype {dtype!r}", where="dtype", fix=f"use one of {list(DTYPES)}")
    if where.device == "cpu":
        chosen = "float32" if dtype == "auto" else dtype
        if chosen == "float16":
            raise IkatError("float16 is not computed on the CPU", where="dtype",
                            fix="use bfloat16 or float32 (the default) on a CPU")
        exact = kind == "bi-encoder" and chosen == "float32"
        return Placement("cpu", chosen, None if exact else TOLERANCE[chosen])
    chosen = CUDA_DTYPE[kind] if dtype == "auto" else dtype
    if chosen == "bfloat16" and not where.bf16:
        chosen = "float16"
    return Placement(where.device, chosen, TOLERANCE[chosen])

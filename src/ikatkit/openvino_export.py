"""One way to run a PyTorch network on OpenVINO (CPU, float32), for the bi-encoder and the cross-encoder.

The network is converted once with ``openvino.convert_model`` and saved as IR (``model.xml``/``.bin``, float32
weights) under ``openvino`` of the cache folder (:mod:`ikatkit.paths`), by a hash of its weights and of
everything else that changes the conversion (config, library versions); a cluster node converts into its own
cache. Callers check the compiled model against PyTorch on probe inputs.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ikatkit.paths import cache_root


def ir_folder(network: Any, *extra: Any) -> Path:
    """Where the IR of ``network`` is kept: the cache, by a hash of its weights, ``extra`` (what else changes the
    converted model: pooling, config) and the versions of torch, transformers and OpenVINO."""
    import openvino
    import torch
    import transformers

    from ikatkit.digest import model_digest

    digest = model_digest(network, torch.__version__, transformers.__version__, openvino.__version__, *extra)
    return cache_root() / "openvino" / digest[:16]


def positional(network: Any, names: Sequence[str], output: Callable[[Any, dict[str, Any]], Any]) -> Any:
    """A torch module taking the inputs ``names`` positionally and returning ``output(network, inputs)``: the
    shape ``convert_model`` traces."""
    import torch

    class Positional(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.network = network

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return output(self.network, dict(zip(names, inputs)))

    return Positional().eval()


def export_ir(module: Any, example: Sequence[Any], folder: Path) -> Path:
    """``module`` converted to OpenVINO IR in ``folder`` (kept when already there), traced on the tensors
    ``example``; written to a temporary folder first, then renamed into place."""
    import openvino
    import torch

    target = folder / "model.xml"
    if target.exists():
        return target
    work = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's warnings about Python control flow
            converted = openvino.convert_model(module, example_input=tuple(example))
        openvino.save_model(converted, str(work / "model.xml"), compress_to_fp16=False)  # float32 weights
        folder.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work, folder)
    except OSError:
        if not target.exists():  # else another process finished first
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def compile_ir(path: str | Path, threads: int | None = None, hint: str = "THROUGHPUT") -> Any:
    """The IR at ``path`` compiled for the CPU in float32 (never bf16, which OpenVINO would pick on CPUs that have
    it), on ``threads`` threads not pinned to cores (default: as OpenVINO chooses; pinned, two one-thread
    processes both took core 0, each at half speed)."""
    import openvino

    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": hint}
    if threads:
        config.update(INFERENCE_NUM_THREADS=threads, ENABLE_CPU_PINNING=False)
    return openvino.Core().compile_model(str(path), "CPU", config)

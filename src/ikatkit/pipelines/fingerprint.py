"""What a run's checkpoints belong to: a digest per input that changes outputs.

``parts`` names each input (config, prompts, topics, index, ikatkit version, threads, the device torch's models run
on, each model's identity), so a refused resume says what changed. What makes a resource's identity is what its kind
declares (:class:`ikatkit.pipelines.resources.ResourceKind`): a local model file or folder (``bundled:*`` included)
by its content, a hub id by the revision in the local Hugging Face cache, an OpenAI-compatible model by name and
server; LoRA adapters and trained PTKB models (a stage's ``classifier``) by their content.
"""

from __future__ import annotations

import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

from ikatkit import __version__
from ikatkit.digest import file_digest, json_digest, tree_digest
from ikatkit.index.manifest import MANIFEST
from ikatkit.index.lucene import index_identity, is_lucene_folder
from ikatkit.models import resolve_model
from ikatkit.pipelines.resources import Resource, declared
from ikatkit.artifact import HDF5_ARRAY
from ikatkit.index.manifest import PARTITIONS_FILE


def _sha(data: Any) -> str:
    return json_digest(data)[:16]


def prompts_digest() -> str:
    """Every prompt file's name and text."""
    folder = files("ikatkit.llm") / "prompts"
    return _sha({p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir(), key=lambda p: p.name)
                 if p.name.endswith(".txt")})


def model_identity(model: str, memo: Path | None = None, revision: str | None = None) -> str:
    """A local model by content; a hub id by its cached revision (or the one the config pins)."""
    path = Path(resolve_model(model))
    if path.exists():
        return "sha256:" + tree_digest(path, memo)
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json", revision=revision)
    except Exception:  # not a valid repo id: the loader will say so
        found = None
    if isinstance(found, str):
        return f"hub:{model}@{Path(found).parent.name}"
    return f"hub:{model}@{revision or 'not in the local cache'}"


def resource_identity(resource: Resource, memo: Path | None = None) -> dict[str, str]:
    """The identity of what a resource's kind declares as its identity (``ResourceKind.identity``): its model, its
    own index folders, its adapter; empty for resources without them (BM25, whose index is the run's)."""
    identity: dict[str, str] = {}
    spec = resource.options
    for key in resource.kind.identity:
        value = spec.get(key)
        if not isinstance(value, str):
            continue
        if key == "model" and resource.backend == "openai":
            identity[key] = f"openai:{value}@{spec.get('base_url', 'api.openai.com')}"
        elif key == "model":
            identity[key] = model_identity(value, memo, spec.get("revision"))
        else:
            identity[key] = path_identity(Path(value), memo)
    return identity


def path_identity(path: Path, memo: Path | None = None) -> str:
    """A file or folder a resource reads: an index by its manifest (ikatkit's dense, Lucene or partitioned index)
    or its Lucene commit (a foreign index), anything else (an adapter) by its content."""
    if not path.exists():
        return f"missing:{path}"
    if (path / PARTITIONS_FILE).is_file():
        return _sha((path / PARTITIONS_FILE).read_text(encoding="utf-8"))
    if (path / HDF5_ARRAY).is_file():  # the organizers' SPLADE index (~100 GB): its files' sizes and times
        return _sha(json.dumps({f.name: [f.stat().st_size, f.stat().st_mtime_ns] for f in sorted(path.iterdir())
                                if f.is_file()}, sort_keys=True))
    if (path / MANIFEST).is_file() or is_lucene_folder(path):
        return _sha(index_identity(path))
    return "sha256:" + tree_digest(path, memo)


def threads(uses_torch: bool, configured: int | None = None) -> dict[str, int]:
    """The thread counts that change scores in the last bits (torch's: the config's ``threads``, which the
    pipeline sets, else torch's own; the CPUs OpenVINO uses)."""
    found = {"cpus": len(os.sched_getaffinity(0))}
    if uses_torch:
        import torch

        found["torch"] = configured or torch.get_num_threads()
    return found


def device(uses_torch: bool) -> str:
    """Where torch's models run when a resource names no device (:func:`ikatkit.placement.machine`: the CPU, else
    the GPU's name), so a run begun on the CPU is not resumed on a GPU, nor the reverse."""
    if not uses_torch:
        return "none"
    from ikatkit import placement

    return placement.machine().name


def fingerprint_parts(raw_config: dict[str, Any], records: list[dict[str, Any]], year: int,
                      index: str | Path | None, memo: Path | None = None, models: bool = True) -> dict[str, str]:
    """A digest per input that changes a run's outputs; ``models=False`` leaves out the (slower) model identities."""
    resources = {resource.name: resource for resource in declared(raw_config.get("resources", {}))}
    uses_torch = any("torch" in resource.modules() for resource in resources.values())
    parts = {
        "config": _sha(raw_config),
        "prompts": prompts_digest(),
        "topics": _sha({"year": year, "records": records}),
        "index": _sha(index_identity(index)),
        "ikatkit": __version__,
        "threads": _sha(threads(uses_torch, raw_config.get("threads"))),
        "device": device(uses_torch),
    }
    from ikatkit.rank.ptkb_model import classifier_path

    for path in sorted({s["classifier"] for s in raw_config.get("stages", []) if isinstance(s.get("classifier"), str)}):
        found = classifier_path(path)  # a trained PTKB model (rank_ptkb, classify_ptkb): its content
        parts[f"classifier {path}"] = "sha256:" + file_digest(found) if found.is_file() else f"missing:{path}"
        files = found.with_name(found.name + ".finetuned")  # its fine-tuned model (ikatkit.rank.ptkb_model.files_of)
        if files.is_dir():
            parts[f"classifier files {files}"] = "sha256:" + tree_digest(files)
    for name, resource in sorted(resources.items()) if models else ():
        identity = resource_identity(resource, memo)
        if identity:
            parts[f"resource {name}"] = _sha(identity)
    return parts


def fingerprint(parts: dict[str, str]) -> str:
    return _sha(parts)

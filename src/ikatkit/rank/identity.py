"""A model's identity for caches: a digest of its weights and of everything else that changes its outputs."""

from __future__ import annotations

from typing import Any

from ikatkit.digest import json_hasher


def model_digest(network: Any, *extra: Any) -> str:
    """sha256 of ``network``'s weights (names and bytes, in order) and the canonical JSON of ``extra``
    (configs, library versions)."""
    import torch

    digest = json_hasher(extra, ascii_only=True)
    for name, tensor in network.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()

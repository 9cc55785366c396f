"""Every name a bench script imports from ikatkit exists: a refactor that moves a function breaks the benches,
which the suite does not run (bench_scale.py imported run_anserini from its old module for a session)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_bench_scripts_import_names_that_exist() -> None:
    missing = []
    for path in sorted(BENCH.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ikatkit":
                module = importlib.import_module(node.module)
                missing += [f"{path.name}:{node.lineno} {node.module}.{alias.name}" for alias in node.names
                            if not hasattr(module, alias.name)
                            and importlib.util.find_spec(f"{node.module}.{alias.name}") is None]
    assert not missing

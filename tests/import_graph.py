"""The package's import graph as Python would load it (tests/test_structure.py checks it has no cycle;
tests/test_fixes.py walks it from each command to the errors the command can print)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of ``tree``'s module, classes and functions."""
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def import_graph(src: Path = SRC, package: str = "ikatkit") -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at module level or inside functions; a module's own ancestor
    packages and the root package left out, as importing them is importing oneself). A module loaded by name counts
    as imported: a string outside docstrings that is exactly the name of a module (not of a package: a package's
    name is a namespace as often, an entry point group or a resource anchor), or an entry point's ``module:attr``
    (what ``importlib.import_module`` or a registry's list of modules would load)."""
    modules = {}
    for path in (src / package).rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        anchor = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                named = node.value.partition(":")[0]
                targets = [named] if named in modules and modules[named].name != "__init__.py" else []
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(anchor[: len(anchor) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                found = resolve(target) if target.startswith(package) else None
                if found and found not in (module, package) and not module.startswith(found + "."):
                    graph[module].add(found)
    return graph

"""The toolkit's structure (issues 33, 52): no import cycle in src/ (modules loaded by name included), the engine
(``ikatkit.pipelines``) apart from the built-in stages (``ikatkit.stages``), stages registered (ikatkit's own as a
plugin's, through the ``ikatkit.stages`` entry point group), stage contracts enforced while running (every
registered stage run over the demo's real records, index and bi-encoder), and the contract and config bugs found by
reading the code."""

from __future__ import annotations

import ast
import copy
import graphlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ikatkit.errors import IkatError
from ikatkit.llm.base import LLM
from ikatkit.pipelines.base import INITIAL_FIELDS, SHARED_FIELDS, Stage
from ikatkit.pipelines.record import TurnRecord, records_for
from ikatkit.pipelines.registry import stage_class, stage_names, stage_table
from ikatkit.pipelines.pipeline import RECORD_FIELDS, run_stage
from ikatkit.stages.builtin import MODULES as BUILTIN

from import_graph import SRC, import_graph



# --- imports ------------------------------------------------------------------------------------------------------

def test_no_import_cycle_in_src():
    graph = import_graph()
    assert "ikatkit.pipelines.base" in graph and len(graph) > 80
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        pytest.fail("import cycle: " + " -> ".join(err.args[1]))


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same imports between the toolkit's subpackages (``ikatkit.pipelines`` ...; a top-level module is its own)."""
    top = {module: ".".join(module.split(".")[:2]) for module in graph}
    packages: dict[str, set[str]] = {name: set() for name in top.values()}
    for module, targets in graph.items():
        packages[top[module]] |= {top[target] for target in targets} - {top[module]}
    return packages


def test_no_import_cycle_between_subpackages():
    """pipelines<->partition (the resource table imported the partitioned searcher) and pipelines<->evaluate (the
    context and persona studies ran stages from inside evaluate) were cycles between packages."""
    packages = package_graph(import_graph())
    assert {"ikatkit.pipelines", "ikatkit.evaluate", "ikatkit.retrieve", "ikatkit.studies"} <= set(packages)
    try:
        graphlib.TopologicalSorter(packages).prepare()
    except graphlib.CycleError as err:
        pytest.fail("import cycle between packages: " + " -> ".join(err.args[1]))


def test_the_cycle_check_finds_a_cycle(tmp_path):
    for name, body in (("a", "from pkg import b\n"), ("b", "def f():\n    from pkg.a import x\n")):
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / "pkg" / f"{name}.py").write_text(body)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(import_graph(tmp_path, "pkg")).prepare()
    for name in ("a", "b"):
        (tmp_path / "pkg" / name).mkdir()
        (tmp_path / "pkg" / name / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a" / "x.py").write_text("from pkg.b.y import f\n")
    (tmp_path / "pkg" / "b" / "y.py").write_text("def f():\n    from pkg.a import z\n")
    graph = import_graph(tmp_path, "pkg")
    graph = {m: t for m, t in graph.items() if m.startswith(("pkg.a", "pkg.b"))}
    graphlib.TopologicalSorter(graph).prepare()  # no cycle between modules ...
    with pytest.raises(graphlib.CycleError):  # ... but one between their packages
        graphlib.TopologicalSorter(package_graph(graph)).prepare()


def test_a_module_loaded_by_name_is_an_import(tmp_path):
    """The registry named its built-in stage modules for ``importlib.import_module`` and each of them imported the
    registry: a cycle the graph did not see while it counted import statements only."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "registry.py").write_text(
        '"""pkg.stage is not an import here."""\nimport importlib\n\n'
        'def load():\n    importlib.import_module("pkg.stage")\n')
    (tmp_path / "pkg" / "stage.py").write_text("from pkg.registry import load\n")
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(import_graph(tmp_path, "pkg")).prepare()
    (tmp_path / "pkg" / "registry.py").write_text('POINT = "pkg.stage:Stage"\n')
    assert import_graph(tmp_path, "pkg")["pkg.registry"] == {"pkg.stage"}
    (tmp_path / "pkg" / "registry.py").write_text('"""Loads pkg.stage."""\nGROUP = "pkg"\n')
    assert import_graph(tmp_path, "pkg")["pkg.registry"] == set()


STAGE_MODULES = [module.__name__ for module in BUILTIN]


def test_the_engine_names_no_stage_module_and_a_stage_module_imports_no_other():
    """The engine (``ikatkit.pipelines``) never imports nor names a stage module; ikatkit's own stages reach the
    registry through its ``ikatkit.stages`` entry point (pyproject.toml), as a plugin's do."""
    import tomllib

    graph = import_graph()
    stage_modules = {m for m in graph if m.startswith("ikatkit.stages.")}
    assert set(STAGE_MODULES) == stage_modules - {"ikatkit.stages.builtin"}
    for module in (m for m in graph if m.startswith("ikatkit.pipelines")):
        assert not graph[module] & stage_modules, module
    project = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["ikatkit.stages"] == {"builtin": "ikatkit.stages.builtin:MODULES"}
    code = ("import json, sys, ikatkit.stages.plan; print(json.dumps(sorted(m for m in sys.modules if m in "
            f"{STAGE_MODULES!r})))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(SRC)}).stdout
    assert json.loads(loaded) == ["ikatkit.stages.plan"]


def test_no_module_imports_a_private_name_of_another():
    """``config.py`` used to import ``llm._backend_class``: private names stay in their module."""
    found = []
    for path in (SRC / "ikatkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ikatkit"):
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.endswith("__")]
    assert found == []


# --- issue 67: the index wing on one foundation ---------------------------------------------------------------------

INDEX_KINDS = {  # an index kind: its index module(s) and its searcher (the encoders are shared: index/encode.py,
    # index/sparse_encoder.py; the job, manifest and Lucene modules are the foundation)
    "bm25": {"ikatkit.index.build", "ikatkit.retrieve.bm25"},
    "dense": {"ikatkit.index.dense", "ikatkit.retrieve.dense"},
    "sparse": {"ikatkit.index.sparse", "ikatkit.retrieve.sparse"},
    "partitions": {"ikatkit.partition.build", "ikatkit.retrieve.partitioned"},  # its parts: BM25 indexes
    "sparse-hdf5": {"ikatkit.index.sparse_hdf5", "ikatkit.index.sparse_hdf5_kernels", "ikatkit.retrieve.sparse_hdf5"},
}
FOUNDATION = ("ikatkit.index.job", "ikatkit.index.manifest", "ikatkit.index.lucene", "ikatkit.retrieve.lucene",
              "ikatkit.index.texts", "ikatkit.placement")


def kind_imports(graph: dict[str, set[str]]) -> list[tuple[str, set[str]]]:
    """``(module, the other kinds' modules it imports)`` for each index kind's module and each foundation module that
    imports a kind's; a kind whose modules are missing from ``graph`` is reported with them."""
    every = set().union(*INDEX_KINDS.values())
    found = [(kind, modules - set(graph)) for kind, modules in INDEX_KINDS.items() if not modules <= set(graph)]
    for kind, modules in INDEX_KINDS.items():
        allowed = modules | ({"ikatkit.index.build"} if kind == "partitions" else set())  # builds its BM25 parts
        found += [(module, graph[module] & (every - allowed)) for module in sorted(modules & set(graph))
                  if graph[module] & (every - allowed)]
    found += [(module, graph[module] & every) for module in FOUNDATION if graph.get(module, set()) & every]
    return found


def test_no_index_kind_imports_another():
    """A kind's index module and searcher import the foundation and the shared encoders, never another kind's
    modules (only ``ikatkit/artifact.py``, the table of kinds, names them all); the foundation imports no kind."""
    graph = import_graph()
    assert kind_imports(graph) == []
    every = set().union(*INDEX_KINDS.values())
    searchers = {module for module in every if module.startswith("ikatkit.retrieve.")}
    assert len(searchers) == len(INDEX_KINDS) and searchers <= graph["ikatkit.artifact"]  # the table of kinds


def _package(root: Path, modules: dict[str, str]) -> Path:
    """A package tree under ``root`` of ``modules`` (dotted name -> source), every folder a package."""
    for name, body in modules.items():
        parts = name.split(".")
        path = root.joinpath(*parts).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for depth in range(1, len(parts)):
            root.joinpath(*parts[:depth], "__init__.py").touch()
        path.write_text(body, encoding="utf-8")
    return root


def test_the_kind_check_finds_a_kind_importing_another(tmp_path):
    """Every kind's modules as empty files: none found; then one import of another kind's module, at module level or
    inside a function, by a kind or by the foundation: each is found."""
    empty = dict.fromkeys([*set().union(*INDEX_KINDS.values()), *FOUNDATION, "ikatkit.artifact"], "")
    assert kind_imports(import_graph(_package(tmp_path / "clean", empty))) == []
    for module, body, found in (
            ("ikatkit.index.dense", "from ikatkit.index.sparse import build_sparse\n", "ikatkit.index.sparse"),
            ("ikatkit.retrieve.sparse", "def f():\n    from ikatkit.retrieve import bm25\n", "ikatkit.retrieve.bm25"),
            ("ikatkit.index.job", "import ikatkit.index.dense\n", "ikatkit.index.dense")):
        root = _package(tmp_path / module, {**empty, module: body})
        assert kind_imports(import_graph(root)) == [(module, {found})]


def torch_thread_setters(src: Path = SRC) -> set[str]:
    """The files of ``src/ikatkit`` that set PyTorch's threads: ``torch.set_num_threads`` or
    ``set_num_interop_threads`` called through any name torch is imported as, or imported from torch by name."""
    setters = {"set_num_threads", "set_num_interop_threads"}
    found = set()
    for path in (src / "ikatkit").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for alias in node.names if alias.name == "torch"}
        functions = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and node.module == "torch" for alias in node.names if alias.name in setters}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in setters and isinstance(func.value, ast.Name)
                    and func.value.id in modules) or (isinstance(func, ast.Name) and func.id in functions):
                found.add(str(path.relative_to(src / "ikatkit")))
    return found


def test_only_the_encoder_base_sets_torch_threads():
    """PyTorch's threads are set for a model's call and restored (``placement.torch_threads``), never process-wide
    by a module of its own."""
    assert torch_thread_setters() == {"placement.py"}


@pytest.mark.parametrize("body", [
    "import torch\ntorch.set_num_threads(4)\n",
    "import torch as th\n\ndef f():\n    th.set_num_interop_threads(2)\n",
    "from torch import set_num_threads as threads\nthreads(1)\n",
])
def test_the_thread_check_finds_torch_threads_set_any_way(body, tmp_path):
    """Each way a module may set PyTorch's threads is found; numba's and faiss's threads are not PyTorch's."""
    src = _package(tmp_path, {"ikatkit.placement": "import torch\ntorch.set_num_threads(1)\n",
                              "ikatkit.other": "import numba, faiss\nnumba.set_num_threads(2)\n"
                                               "faiss.omp_set_num_threads(2)\n"})
    assert torch_thread_setters(src) == {"placement.py"}
    (src / "ikatkit" / "rogue.py").write_text(body, encoding="utf-8")
    assert torch_thread_setters(src) == {"placement.py", "rogue.py"}


def device_askers(src: Path = SRC) -> set[str]:
    """The files of ``src/ikatkit`` that ask torch what the machine has (``*.cuda.is_available()``,
    ``is_bf16_supported()``, ``get_device_name()``, ``device_count()``) to decide where a model runs."""
    asks = {"is_available", "is_bf16_supported", "get_device_name", "device_count"}
    return {str(path.relative_to(src / "ikatkit")) for path in (src / "ikatkit").rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in asks
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "cuda"}


def test_only_placement_asks_where_a_model_runs():
    """Where a model runs is decided by ``ikatkit.placement`` alone (``machine``, ``decide``): no module asks torch for
    a GPU itself (the LoRA trainer, preflight and the LLM's quantization check did, issue 67)."""
    assert device_askers() == {"placement.py"}


def test_the_device_check_finds_a_module_asking_torch(tmp_path):
    src = _package(tmp_path, {"ikatkit.placement": "import torch\ntorch.cuda.is_available()\n",
                              "ikatkit.train": "import torch\ntorch.cuda.get_rng_state_all()\n"})
    assert device_askers(src) == {"placement.py"}
    (src / "ikatkit" / "train.py").write_text("def f(torch):\n    return torch.cuda.is_available()\n")
    assert device_askers(src) == {"placement.py", "train.py"}


def _calls(name: str, on: str | None = None, src: Path = SRC) -> list[str]:
    """Where src calls ``name`` (a function or class, by its last dotted part; ``on``: only as ``on.name``)."""
    found = []
    for path in (src / "ikatkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                owner = getattr(func.value, "id", None) if isinstance(func, ast.Attribute) else None
                if called == name and on in (None, owner):
                    found.append(str(path.relative_to(src / "ikatkit")))
    return found


SEARCHER_CLASSES = {"Bm25Searcher", "DenseSearcher", "SparseSearcher", "HDF5SparseSearcher", "PartitionedSearcher"}


def _hands_a_class(expr: ast.expr) -> bool:
    """Whether ``expr`` is what hands back a searcher class: ``searcher_class(kind)``, ``x.searcher_class()``,
    ``x.factory()``, or the resource table's ``_searcher_class(kind)()``."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    named = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if named in ("searcher_class", "factory"):
        return True
    if isinstance(func, ast.Call):
        inner = func.func
        return (inner.attr if isinstance(inner, ast.Attribute) else getattr(inner, "id", "")) == "_searcher_class"
    return False


def searcher_builders(src: Path = SRC) -> dict[str, set[str]]:
    """Searcher class -> the files of ``src/ikatkit`` outside ``artifact.py`` that build one: a call of the class by
    name, or of a class the table of kinds or a folder hands back (:func:`_hands_a_class`)."""
    found: dict[str, set[str]] = {name: set(_calls(name, src=src)) - {"artifact.py"} for name in SEARCHER_CLASSES}
    for path in (src / "ikatkit").rglob("*.py"):
        where = str(path.relative_to(src / "ikatkit"))
        if where != "artifact.py" and any(isinstance(node, ast.Call) and _hands_a_class(node.func)
                                          for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))):
            found.setdefault("(a class from the table of kinds)", set()).add(where)
    return {name: files for name, files in found.items() if files}


def test_searchers_are_built_only_by_open_index():
    """The resource table, ``ikatkit search`` and every other caller build searchers through
    ``ikatkit.artifact.open_index``; the searcher classes are called in src nowhere else."""
    from ikatkit.artifact import SEARCHERS, searcher_class

    assert {searcher_class(kind).__name__ for kind in SEARCHERS} == SEARCHER_CLASSES
    assert searcher_builders() == {}


def test_the_searcher_check_finds_a_searcher_built_elsewhere(tmp_path):
    src = _package(tmp_path, {"ikatkit.artifact": "def f(p):\n    return Bm25Searcher(p), searcher_class('bm25')(p)\n",
                              "ikatkit.opts": "def f(folder):\n    check(_searcher_class('bm25')().__init__)\n"
                                              "    check(folder.factory(), searcher_class('dense').batch_search)\n"})
    assert searcher_builders(src) == {}  # the classes read (their options), not called
    (src / "ikatkit" / "search.py").write_text(
        "from ikatkit.retrieve import bm25\n\ndef f(p):\n    return bm25.Bm25Searcher(p, k1=1.2)\n")
    assert searcher_builders(src) == {"Bm25Searcher": {"search.py"}}
    (src / "ikatkit" / "search.py").write_text("def f(p, folder):\n    return folder.searcher_class()(p)\n")
    assert searcher_builders(src) == {"(a class from the table of kinds)": {"search.py"}}
    for built in ("searcher_class('dense')(p)", "artifact.searcher_class('dense')(p)", "_searcher_class('bm25')()(p)",
                  "folder.factory()(p, threads=1)"):
        (src / "ikatkit" / "search.py").write_text(f"def f(p, folder):\n    return {built}\n")
        assert searcher_builders(src) == {"(a class from the table of kinds)": {"search.py"}}, built


KIND_NAMES = ("BM25", "DENSE", "SPARSE", "PARTITIONS", "SPARSE_HDF5")  # ikatkit.index.kinds' constants


def kind_tables(src: Path = SRC) -> dict[str, list[str]]:
    """File -> the tables of index kinds it declares outside ``index/kinds.py``: a dict written with two or more keys
    that are kind names (the constants or their strings) or searcher class names, or a tuple/list/set of two or more
    kind constants, at module or class level (a function's local lookup is code, not a table). ``artifact.py``'s
    ``SEARCHERS`` is allowed: where each searcher class is cannot be in the records, which the searchers read."""
    from ikatkit.index.kinds import INDEX_KINDS

    names = set(INDEX_KINDS)

    def is_kind(node: ast.expr | None) -> bool:
        return (isinstance(node, ast.Name) and node.id in KIND_NAMES) or \
            (isinstance(node, ast.Attribute) and node.attr in KIND_NAMES)

    def keyed(node: ast.expr | None) -> bool:
        return is_kind(node) or (isinstance(node, ast.Constant) and node.value in names | SEARCHER_CLASSES)

    found: dict[str, list[str]] = {}
    for path in (src / "ikatkit").rglob("*.py"):
        where = str(path.relative_to(src / "ikatkit"))
        if where == "index/kinds.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes = [tree, *(node for node in tree.body if isinstance(node, ast.ClassDef))]
        for scope in scopes:
            for statement in scope.body:
                if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
                    continue
                target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
                name = getattr(target, "id", ast.unparse(target))
                for node in ast.walk(statement.value):
                    if isinstance(node, ast.Dict) and sum(map(keyed, node.keys)) >= 2 and \
                            not (where == "artifact.py" and name == "SEARCHERS"):
                        found.setdefault(where, []).append(name)
                        break
                    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and sum(map(is_kind, node.elts)) >= 2 and \
                            not isinstance(target, ast.Tuple):  # BM25, DENSE, ... = the names themselves
                        found.setdefault(where, []).append(name)
                        break
    return found


def test_an_index_kind_is_one_record_in_one_table():
    """What docs/development.md's "Where a new index kind goes" says: an index kind's facts (what it is, its manifest
    file, how it is searched, its searcher's modules, where its texts are, what builds it, its aliases) are one
    :class:`ikatkit.index.kinds.IndexKind` record in ``INDEX_KINDS``, and no other module declares a table keyed by
    the kinds (there were eight, in four modules: a kind missing from one was a KeyError on a user's error path);
    its searcher class is ``artifact.SEARCHERS``' (one line) and says its own PTKB expansion default; the resource
    table's searcher rows take their name, searcher and modules from the record."""
    from ikatkit import artifact
    from ikatkit.index.kinds import INDEX_KINDS, IndexKind
    from ikatkit.pipelines.resources import KINDS as RESOURCES

    assert kind_tables() == {}
    assert all(isinstance(kind, IndexKind) and kind.name == name for name, kind in INDEX_KINDS.items())
    assert set(artifact.SEARCHERS) == set(INDEX_KINDS)
    assert {kind.resource for kind in INDEX_KINDS.values()} <= set(RESOURCES)
    assert all(searched in INDEX_KINDS for kind in INDEX_KINDS.values() for searched in kind.searched_as)
    for name, kind in INDEX_KINDS.items():
        resource = RESOURCES[kind.resource]
        assert resource.serves == "searcher"
        if kind.resource == name or kind.resource not in INDEX_KINDS:  # the row of the kind itself
            assert resource.modules == kind.modules and resource.searcher_class is not None
            assert resource.searcher_class() is artifact.searcher_class(name)
    classes = {name: artifact.searcher_class(name) for name in INDEX_KINDS}
    assert {name: cls.__dict__.get("expands_ptkb") for name, cls in classes.items()} == {
        "bm25": True, "dense": False, "sparse": False, "partitions": True, "sparse-hdf5": False}


def test_the_kind_table_check_finds_a_second_table(tmp_path):
    clean = {"ikatkit.index.kinds": "TABLE = {BM25: 1, DENSE: 2}\n",
             "ikatkit.artifact": "SEARCHERS = {BM25: 'a:B', DENSE: 'c:D'}\n"
                                 "BM25, DENSE = 'bm25', 'dense'\n"
                                 "def f(kind):\n    return {BM25: 1, DENSE: 2}[kind]\n",
             "ikatkit.opts": "ONE = {BM25: 'x'}\nPAIR = (BM25, 'other')\n"}
    assert kind_tables(_package(tmp_path / "clean", clean)) == {}
    for body, name in (("DESCRIBED = {BM25: 'a', DENSE: 'b'}\n", "DESCRIBED"),
                       ("MODULES: dict[str, tuple] = {'bm25': (), 'partitions': ()}\n", "MODULES"),
                       ("KINDS = (BM25, DENSE, SPARSE)\n", "KINDS"),
                       ("EXPANDS = {'Bm25Searcher': True, 'DenseSearcher': False}\n", "EXPANDS"),
                       ("class S:\n    SEEN = {manifest.BM25: 1, manifest.SPARSE: 2}\n", "SEEN")):
        root = _package(tmp_path / name, {**clean, "ikatkit.opts": body})
        assert kind_tables(root) == {"opts.py": [name]}, body


def test_one_definition_of_each_capability_and_one_placement_class():
    """``Hit``, ``Ranker`` and ``Encoder`` are defined once (``capabilities.py``); ``Placement`` names one class."""
    defined: dict[str, list[str]] = {}
    for path in (SRC / "ikatkit").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else [
                t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)]
            for name in names:
                defined.setdefault(name, []).append(str(path.relative_to(SRC / "ikatkit")))
    for name in ("Hit", "Ranker", "Encoder"):
        assert defined[name] == ["capabilities.py"], (name, defined[name])
    assert defined["Placement"] == ["placement.py"]


# --- the registry ---------------------------------------------------------------------------------------------------

def test_the_registry_lists_every_stage_with_its_declared_fields(capsys):
    from ikatkit.cli import main

    fields = {f.name for f in TurnRecord.__dataclass_fields__.values()}
    rows = stage_table()
    assert [row["name"] for row in rows] == list(stage_names()) and len(rows) >= 20
    for row in rows:
        declared = row["requires"] + row["ordered"] + row["optional"] + row["provides"] + row["single_list_provides"]
        assert set(declared) <= fields, row["name"]
        assert row["provides"] or row["single_list_provides"], row["name"]
        assert issubclass(stage_class(row["name"]), Stage)
    assert set(INITIAL_FIELDS) | set(SHARED_FIELDS) <= fields
    assert main(["stages"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{name}: " in "\n" + out for name in stage_names())
    assert "rank_ptkb: " in out and "  ordered:   query, context_ids\n  provides:  ptkb" in out
    assert main(["stages", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows


def test_an_unknown_stage_is_one_clear_error():
    with pytest.raises(IkatError) as err:
        stage_class("rewrit")
    assert "unknown stage 'rewrit'" in err.value.message and "'rewrite'" in err.value.fix


PLUGIN = '''
from ikatkit.pipelines.base import Stage


class EchoQuery(Stage):
    """Query = the utterance, shouted."""

    name = "echo_query"
    provides = ("query",)

    def transform(self, records):
        for record in records:
            record.query = record.utterance.upper()
        return records
'''


def test_a_third_party_stage_through_the_entry_point(tmp_path, demo_dir):
    """A package declaring ``ikatkit.stages`` (here an installed distribution's metadata on the path) adds its
    stage: listed, accepted by load_config, run by the runner with its contract enforced."""
    (tmp_path / "shouting.py").write_text(PLUGIN)
    info = tmp_path / "shouting-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shouting\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ikatkit.stages]\necho_query = shouting:EchoQuery\n")
    config = tmp_path / "shout.toml"
    config.write_text('name = "shout"\n[[stages]]\nstage = "echo_query"\n')
    code = textwrap.dedent(f"""
        from ikatkit.pipelines import load_config
        from ikatkit.pipelines.config import Resources, build_stages
        from ikatkit.pipelines.record import records_for
        from ikatkit.pipelines.registry import stage_names
        from ikatkit.pipelines.pipeline import run_stage
        from ikatkit.topics import load_topics
        config = load_config({str(config)!r})
        [stage] = build_stages(config, Resources(config, None, None))
        records = run_stage(stage, records_for(load_topics({str(demo_dir / "topics.json")!r}).subset(["demo-1"])))
        print(stage_names()[-1], records[0].query)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1) == ["echo_query", "HOW MUCH PROTEIN DO I NEED EACH DAY?\n"]
    (info / "entry_points.txt").write_text("[ikatkit.stages]\nbroken = shouting_missing:Nothing\n")
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "stages"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"})
    assert done.returncode == 2 and "the stage entry point 'broken' (shouting_missing:Nothing) does not load" in \
        done.stderr and "ModuleNotFoundError" in done.stderr and len(done.stderr.splitlines()) == 1
    assert "\nrewrite: " in done.stdout  # the other stages still load
    config.write_text('name = "x"\n[[stages]]\nstage = "broken"\n')
    done = subprocess.run([sys.executable, "-m", "ikatkit.cli", "run", str(config), "--topics",
                           str(demo_dir / "topics.json"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"})
    assert done.returncode == 2 and "'broken' (shouting_missing:Nothing) does not load" in done.stderr


# --- contracts enforced while running ---------------------------------------------------------------------------------

ANSWER = "Tofu, lentils and beans give a vegetarian runner about 1.4 g of protein per kg each day."


class PromptLLM(LLM):
    """A unit-test double on the real LLM base (cache, stats, fallbacks): a plausible reply per prompt task;
    ``prompts`` keeps every prompt it was given."""

    backend = "scripted"

    def __init__(self) -> None:
        super().__init__("scripted", temperature=0.7)
        self.prompts: list[str] = []

    def _generate(self, batch: list[Any], params: dict[str, Any], seeds: list[int] | None = None) -> list[tuple]:
        out = []
        for messages in batch:
            text = "\n".join(m["content"] for m in messages)
            self.prompts.append(text)
            if "[SOURCE]" in text:
                reply = "[SOURCE] PTKB, PASSAGES [EOS]"
            elif text.rstrip().endswith("### Relevant Statements:"):
                reply = "1, 2"
            elif text.rstrip().endswith("### Rewritten User Question:"):
                reply = "How much protein does a vegetarian marathon runner need each day?"
            else:
                reply = ANSWER
            out.append((reply, 1, 1))
        return out


@pytest.fixture(scope="module")
def kit(demo_dir, demo_index, tmp_path_factory):
    """Real resources over the demo: its Lucene index (BM25), one partition of it, the bundled MiniLM;
    the scripted LLM; a query file and a memory selector trained for nothing (zero weights)."""
    from ikatkit.partition.build import partition_index
    from ikatkit.stages.memory import MemorySelector, RefineMemory
    from ikatkit.retrieve.partitioned import PartitionedSearcher
    from ikatkit.rank import make_ranker
    from ikatkit.retrieve.bm25 import Bm25Searcher
    from ikatkit.topics import load_topics

    folder = tmp_path_factory.mktemp("structure")
    partition_index(demo_index, folder / "parts", "category", 1, field="id", pattern=r"(\d)$", threads=1)
    topics = load_topics(demo_dir / "topics.json").subset(["demo-1"])
    queries = folder / "queries.tsv"
    queries.write_text("".join(f"{t.qid}\t{t.resolved_utterance or t.utterance}\n" for t in topics))
    llm, bm25 = PromptLLM(), Bm25Searcher(demo_index)
    selector = folder / "selector.json"
    fingerprint = RefineMemory(llm, bm25.texts, selector="", **OPTIONS["refine_memory"]).fingerprint()
    MemorySelector([0.0] * 6, 0.1, [0.0] * 6, [1.0] * 6, fingerprint).save(selector)
    return {"llm": llm, "searcher": bm25, "ranker": make_ranker("bi-encoder", "bundled:minilm",
                                                                  cache_dir=folder / "embeddings"),
            "partitions": PartitionedSearcher(folder / "parts"), "records": records_for(topics),
            "queries": str(queries), "selector": str(selector)}


# A pipeline that gives every stage what it requires; each stage runs on the records as they are after the last
# stage of it after which what the stage requires is set, with these options (resources by parameter name).
PIPELINE = ("select_context", "rewrite", "rank_ptkb", "generate_answer", "retrieve", "rerank", "plan_sources",
            "respond")
OPTIONS: dict[str, dict[str, Any]] = {
    "select_context": {"method": "cascade", "passages": 3}, "rank_ptkb": {"k": 2}, "retrieve": {"k": 20},
    "rerank": {"k": 10}, "plan_sources": {"planner": "llm"}, "fuse": {"method": "rrf", "k": 20},
    "refine_response": {"n": 2, "iterations": 1}, "refine_evidence": {"rounds": 1},
    "select_partition": {"method": "all"}, "refine_memory": {"k": 2},
}


def build(name: str, kit: dict[str, Any]) -> Stage:
    import inspect

    cls = stage_class(name)
    accepted = inspect.signature(cls.__init__).parameters
    options = dict(OPTIONS.get(name, {}))
    for param in ("llm", "ranker", "searcher"):
        if param in accepted:
            options[param] = kit["partitions"] if name == "select_partition" and param == "searcher" else kit[param]
    if "texts" in accepted:  # the passage texts of the kit's BM25 index
        options["texts"] = kit["searcher"].texts
    for param, key in (("path", "queries"), ("selector", "selector")):
        if param in accepted:
            options[param] = kit[key]
    return cls(**options)


@pytest.fixture(scope="module")
def prepared(kit):
    """The records after each stage of PIPELINE (run with their contracts enforced), with the fields then set."""
    records, available = copy.deepcopy(kit["records"]), set(INITIAL_FIELDS)
    steps = [(copy.deepcopy(records), set(available))]
    for name in PIPELINE:
        stage = build(name, kit)
        records = run_stage(stage, records)
        available |= set(stage.provides) | set(stage.single_list_provides)
        steps.append((copy.deepcopy(records), set(available)))
    return steps


@pytest.mark.parametrize("name", stage_names())
def test_every_stage_writes_only_the_fields_it_declares(name, kit, prepared):
    stage = build(name, kit)
    before = next(step for step in prepared if set(stage.requires) <= step[1])[0]
    after = run_stage(stage, copy.deepcopy(before))  # raises on a field written and not declared
    changed = {f for old, new in zip(before, after) for f in RECORD_FIELDS if getattr(old, f) != getattr(new, f)}
    assert changed <= type(stage).declared()
    assert changed - set(SHARED_FIELDS), f"{name} changed nothing on the demo's records"


class Sneaky(Stage):
    name = "sneaky"
    provides = ("query",)

    def transform(self, records: list[TurnRecord]) -> list[TurnRecord]:
        for record in records:
            record.query = "x"
            record.notes.append("shared fields may be written")
            record.candidates["bm25\tx"] = []  # changed in place, undeclared
        return records


def test_a_stage_writing_an_undeclared_field_fails_naming_stage_and_field(kit):
    with pytest.raises(IkatError) as err:
        run_stage(Sneaky(), copy.deepcopy(kit["records"]))
    assert "'sneaky' changed 'candidates' of turn demo-1_1" in err.value.message
    assert "Sneaky.provides" in err.value.fix

    class Dropping(Sneaky):
        def transform(self, records):
            return records[1:]

    with pytest.raises(IkatError, match="'sneaky' returned turns"):
        run_stage(Dropping(), copy.deepcopy(kit["records"]))


# --- bugs found by reading the code (each test failed before its fix) ------------------------------------------------

HEAD = """name = "x"
[resources.llm]
kind = "llm"
model = "bundled:smollm2"
[resources.minilm]
kind = "bi-encoder"
model = "bundled:minilm"
[resources.bm25]
kind = "bm25"
"""


def _load(tmp_path: Path, text: str) -> Any:
    from ikatkit.pipelines import load_config

    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path)


def _stages(*names: str) -> str:
    return "".join(f'[[stages]]\nstage = "{n}"\n' for n in names)


def test_rank_ptkb_before_rewrite_is_rejected(tmp_path):
    """rank_ptkb reads the query when one is set: before rewrite it silently ranked the raw utterance."""
    with pytest.raises(IkatError) as err:
        _load(tmp_path, HEAD + _stages("rank_ptkb", "rewrite", "retrieve", "respond"))
    assert err.value.where == "stages[0] (rank_ptkb)" and "reads 'query'" in err.value.message
    assert err.value.fix == "put 'rewrite' before 'rank_ptkb'"
    assert _load(tmp_path, HEAD + _stages("rewrite", "rank_ptkb", "retrieve", "respond"))


def test_select_context_after_rewrite_is_rejected(tmp_path):
    """select_context after rewrite did nothing: the rewrite had read every previous turn."""
    with pytest.raises(IkatError) as err:
        _load(tmp_path, HEAD + _stages("rewrite", "select_context", "retrieve", "respond"))
    assert err.value.where == "stages[0] (rewrite)" and "'context_ids'" in err.value.message
    assert "'select_context' before 'rewrite'" in err.value.fix
    _load(tmp_path, HEAD + _stages("select_context", "rewrite", "retrieve", "respond"))


def test_retrieve_expanding_with_a_ptkb_chosen_later_is_rejected(tmp_path):
    gtr = _stages("generate_answer", "generate_queries", "retrieve", "rerank", "fuse", "classify_ptkb")
    with pytest.raises(IkatError, match="reads 'ptkb'"):
        _load(tmp_path, HEAD + gtr.replace('"retrieve"\n', '"retrieve"\nsearcher = "bm25"\n'))
    _load(tmp_path, HEAD + gtr.replace('"retrieve"\n', '"retrieve"\nexpand_ptkb = false\n'))  # the GtR config


def test_refine_response_prompts_read_the_selected_context(kit):
    """refine_response built its prompts from every previous turn, not those select_context kept."""
    from ikatkit.stages.refine import RefineResponse

    record = copy.deepcopy(kit["records"][3])
    record.context_ids = [record.history_ids[0]]
    record.used, record.passage_texts, record.response = ["d:1"], {"d:1": ANSWER}, ANSWER
    llm = PromptLLM()
    RefineResponse(llm, n=1, iterations=0).transform([record])
    kept, dropped = record.history[0][0], record.history[1][0]
    assert llm.prompts and all(kept in p and dropped not in p for p in llm.prompts)


def test_select_partition_with_a_plain_bm25_retrieve_is_rejected_at_load(tmp_path):
    """retrieve passed partitions= to a bm25 searcher, a TypeError once the run started."""
    parts = '[resources.parts]\nkind = "partitioned-bm25"\npartitions = "parts"\n'
    stages = ('[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "select_partition"\nsearcher = "parts"\n'
              'method = "all"\n[[stages]]\nstage = "retrieve"\nsearcher = "{}"\n[[stages]]\nstage = "respond"\n'
              'searcher = "parts"\n')
    with pytest.raises(IkatError) as err:
        _load(tmp_path, HEAD + parts + stages.format("bm25"))
    assert err.value.where == "stages[2] (retrieve)" and "a 'bm25' resource, after select_partition" in \
        err.value.message and "partitioned-bm25" in err.value.fix
    assert _load(tmp_path, HEAD + parts + stages.format("parts"))


def test_select_partition_options_and_resources_are_checked_at_load(tmp_path):
    from ikatkit.stages.partition import SelectPartition

    with pytest.raises(IkatError, match="unknown select_partition method 'nearest'"):
        SelectPartition.check({"method": "nearest"})
    parts = '[resources.parts]\nkind = "partitioned-bm25"\n'
    base = '[[stages]]\nstage = "manual_query"\n[[stages]]\nstage = "select_partition"\nsearcher = "{}"\n{}'
    for searcher, extra, message in (("parts", "", "needs policy"), ("parts", "top = 0\nmethod = \"all\"\n", "top = 0"),
                                     ("bm25", 'method = "all"\n', "needs a partitioned-bm25 searcher"),
                                     ("parts", 'method = "centroid"\n', "needs a bi-encoder ranker")):
        text = HEAD.replace('kind = "bi-encoder"', 'kind = "cross-encoder"') + parts + base.format(searcher, extra)
        with pytest.raises(IkatError, match=message):
            _load(tmp_path, text + ('ranker = "minilm"\n' if "centroid" in extra else ""))


def test_fuse_rejects_an_unknown_method_at_load_and_when_built(tmp_path):
    from ikatkit.stages.core import Fuse

    with pytest.raises(IkatError, match="unknown fusion method 'borda'"):  # was a KeyError
        Fuse(method="borda")
    with pytest.raises(IkatError) as err:
        _load(tmp_path, HEAD + _stages("raw_query", "retrieve", "fuse").replace('"fuse"\n', '"fuse"\nmethod = "x"\n'))
    assert err.value.where.startswith("stages[2].method, line") and "'x'" in err.value.message
    assert "interleave" in err.value.fix


@pytest.mark.parametrize("resource, where, message", [
    ('kind = "dense"\nnprobe = "many"\npath = "d"', "resources.r.nprobe", "nprobe = 'many' is not of type int"),
    ('kind = "dense"\nnprobes = 8\npath = "d"', "resources.r.nprobes", "unknown option 'nprobes'"),
    ('kind = "dense"', "resources.r.path", "names its index folder"),
    ('kind = "partitioned-bm25"\nk2 = 1.0', "resources.r.k2", "unknown option 'k2'"),
    ('kind = "partitioned-bm25"\nthreads = "two"', "resources.r.threads", "threads = 'two' is not of type int"),
    ('kind = "partitioned-bm25"\npartitions = 3', "resources.r.partitions", "is not a folder name"),
])
def test_dense_and_partitioned_resource_options_are_checked_at_load(tmp_path, resource, where, message):
    with pytest.raises(IkatError) as err:
        _load(tmp_path, f'name = "x"\n[resources.r]\n{resource}\n' + _stages("raw_query"))
    assert err.value.where == where and message in err.value.message


def test_every_resource_kind_has_a_check_and_a_factory():
    from ikatkit.pipelines.resources import KINDS, PARAM_KINDS, resource

    assert set(KINDS) == {k for kinds in PARAM_KINDS.values() for k in kinds}
    assert list(KINDS) == ["llm", "bi-encoder", "cross-encoder", "bm25", "dense", "sparse", "partitioned-bm25", "texts"]
    for kind in KINDS.values():
        assert callable(kind.check) and callable(kind.build)
    with pytest.raises(IkatError, match="unknown option"):
        resource("llm", {"kind": "llm", "model": "m", "temprature": 0.1})


# --- issue 52: typed resources, capabilities, the training hook, one read of a query file ----------------------------

def test_resource_kinds_declare_what_preflight_fingerprint_and_catalogue_read(tmp_path):
    from ikatkit.pipelines import load_config
    from ikatkit.pipelines.fingerprint import fingerprint_parts
    from ikatkit.pipelines.preflight import config_needs
    from ikatkit.pipelines.resources import KINDS, Resource

    config = load_config(SRC / "ikatkit" / "data" / "configs" / "demo.toml")
    llm, minilm, bm25 = (config.resources[name] for name in ("llm", "minilm", "bm25"))
    assert all(isinstance(r, Resource) for r in (llm, minilm, bm25))
    assert (llm.kind, minilm.kind, bm25.kind) == (KINDS["llm"], KINDS["bi-encoder"], KINDS["bm25"])
    assert dict(minilm) == {"kind": "bi-encoder", "model": "bundled:minilm"} and bm25["k1"] == 0.9
    assert llm.modules() == ["torch", "transformers"] and minilm.modules() == ["torch", "sentence_transformers"]
    assert bm25.modules() == ["pyserini", "jnius"] and bm25.models() == [] and minilm.models() == [
        ("model", "bundled:minilm")]
    needs = config_needs(config.raw)
    assert needs.models == [("resources.llm.model", "bundled:smollm2", False),
                            ("resources.minilm.model", "bundled:minilm", True)]
    assert needs.modules == ["torch", "transformers", "torch", "sentence_transformers", "pyserini", "jnius"]
    parts = fingerprint_parts(config.raw, [], 2023, None)
    assert sorted(p for p in parts if p.startswith("resource ")) == ["resource llm", "resource minilm"]
    with pytest.raises(IkatError) as err:
        _load(tmp_path, 'name = "x"\n[resources.r]\nkind = "bm25"\nk3 = 1\n' + _stages("raw_query"))
    assert err.value.where == "resources.r.k3" and "unknown option 'k3'" in err.value.message


def test_resources_are_the_capabilities_stages_ask_for(kit):
    from ikatkit.capabilities import ChatLLM, Encoder, Partitioned, Ranker, Searcher, TextSearcher

    assert isinstance(kit["llm"], ChatLLM) and isinstance(kit["ranker"], Encoder) and isinstance(kit["ranker"], Ranker)
    assert isinstance(kit["searcher"], TextSearcher) and not isinstance(kit["searcher"], Partitioned)
    assert isinstance(kit["partitions"], Partitioned) and not isinstance(kit["partitions"], TextSearcher)
    assert isinstance(kit["partitions"], Searcher) and not isinstance(kit["llm"], Searcher)
    with pytest.raises(IkatError, match="needs a partitioned-bm25 searcher"):
        stage_class("select_partition")(kit["searcher"], kit["ranker"], method="all")


def test_the_training_hook_runs_with_the_stage_contract_enforced(kit):
    from ikatkit.pipelines.pipeline import train_stage

    class Learner(Stage):
        name = "learner"
        provides = ("memory",)

        def train(self, records, references, respond):
            for record in records:
                record.memory = references[record.qid]
            return [len(records)]

    records = copy.deepcopy(kit["records"][:2])
    references = {r.qid: f"reference of {r.qid}" for r in records}
    assert train_stage(Learner(), records, references, lambda rs: rs) == [2]
    assert [r.memory for r in records] == ["reference of demo-1_1", "reference of demo-1_2"]
    assert train_stage(Sneaky(), records, references, lambda rs: rs) == []  # the default: nothing to learn

    class Cheater(Learner):
        def train(self, records, references, respond):
            records[0].query = "changed"
            return []

    with pytest.raises(IkatError, match="'learner' changed 'query' of turn demo-1_1"):
        train_stage(Cheater(), records, references, lambda rs: rs)


def test_a_query_file_is_read_and_hashed_once(tmp_path):
    from ikatkit.digest import file_digest
    from ikatkit.pipelines.queries import query_file, read_queries

    path = tmp_path / "queries.tsv"
    path.write_bytes(b"demo-1_1\tprotein\r\n\ndemo-1_2\tiron intake\n")
    first = query_file(path)
    assert first.queries == {"demo-1_1": "protein", "demo-1_2": "iron intake"} and first.sha256 == file_digest(path)
    assert query_file(str(path)) is first and read_queries(path) == first.queries
    path.write_bytes(b"demo-1_1\tprotein per day\n")
    assert query_file(path).queries == {"demo-1_1": "protein per day"} and query_file(path).sha256 == \
        file_digest(path)

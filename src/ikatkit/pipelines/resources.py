"""Resources a config declares (``[resources.NAME]`` with a ``kind``): one table of kinds (:data:`KINDS`), each
declaring once what every reader needs: the stage parameter it serves, its option check and factory, the optional
modules building it imports (by backend for an LLM), the options naming the models and files it loads, the options
that make its identity (the fingerprint's), what else it needs (the catalogue's). A config's resources are
:class:`Resource` records (:func:`resource` checks one); the one place a stage's unnamed resource parameter gets its
default is :func:`stage_resources`.

A kind's ``check`` runs at config load (nothing opens); its ``build`` runs when a stage first needs the resource.
Preflight (:mod:`ikatkit.pipelines.preflight`), the fingerprint (:mod:`ikatkit.pipelines.fingerprint`) and the
catalogue (:mod:`ikatkit.catalogue`) read these declarations, never a kind's name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ikatkit.errors import IkatError
from ikatkit.index.kinds import BM25, DENSE, INDEX_KINDS, PARTITIONS, SPARSE, canonical
from ikatkit.pipelines.base import Stage
from ikatkit.pipelines.options import TableView, check_options
from ikatkit.suggest import did_you_mean

PARAMS = ("llm", "ranker", "searcher", "texts")  # the stage parameters a resource fills


@dataclass(frozen=True)
class Where:
    """What building a resource may need besides its options: the run's ``--index`` and cache folder."""

    index: str | Path | None
    cache_dir: Path
    config: Path | None = None


@dataclass(frozen=True, eq=False)
class ResourceKind:
    """One kind of resource: the stage parameter it serves, its option check and its factory (options without
    ``kind``; the factory may change its copy), and what the readers of a config need to know of it:

    - ``modules``: the optional modules building it imports (their extras are named when one is absent);
      ``backends``: more of them by the ``backend`` option (an LLM's), ``default_backend`` when none is given;
      ``option_modules``: more of them when an option is set (an LLM's ``adapter``: peft);
    - ``models``: the options naming a model it loads; ``cache_only``: its loader never downloads;
    - ``files``: the options naming files or folders it reads;
    - ``identity``: the options whose content is its identity in a run's fingerprint: its models and every
      option of ``files`` (:func:`ikatkit.pipelines.fingerprint.resource_identity`);
    - ``needs``: what it needs besides, for the config catalogue (a searcher's index)."""

    name: str
    serves: str
    check: Callable[[dict[str, Any]], None]
    build: Callable[[str, dict[str, Any], Where], Any]
    searcher_class: Callable[[], type[Any]] | None = None
    modules: tuple[str, ...] = ()
    backends: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    default_backend: str | None = None
    option_modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    cache_only: bool = False
    files: tuple[str, ...] = ()
    identity: tuple[str, ...] = ()
    needs: str = ""


@dataclass(frozen=True, eq=False)
class Resource(TableView):
    """One checked ``[resources.NAME]`` table: its name, its kind and its options (without ``kind``). Read as a
    mapping it is the table as written (``resource["kind"]``, ``dict(resource)``)."""

    name: str
    kind: ResourceKind
    options: Mapping[str, Any]

    @property
    def backend(self) -> str | None:
        """The LLM backend (None for a kind without backends)."""
        return self.options.get("backend", self.kind.default_backend) if self.kind.backends else None

    def modules(self) -> list[str]:
        """The optional modules building it imports."""
        return [*self.kind.modules, *self.kind.backends.get(self.backend or "", ()),
                *(m for key, found in self.kind.option_modules.items() if self.options.get(key) for m in found)]

    def models(self) -> list[tuple[str, str]]:
        """``(option, model)`` for each model it names."""
        return [(key, self.options[key]) for key in self.kind.models if isinstance(self.options.get(key), str)]

    def files(self) -> list[str]:
        """The files and folders it names."""
        return [str(self.options[key]) for key in self.kind.files if isinstance(self.options.get(key), str)]

    def _table(self) -> dict[str, Any]:
        return {"kind": self.kind.name, **self.options}


def _need_model(options: dict[str, Any]) -> None:
    if not isinstance(options.get("model"), str):
        raise IkatError("the resource names no model", where="model", fix='add model = "<hub id, path or bundled:...>"')


def _check_llm(options: dict[str, Any]) -> None:
    from ikatkit.llm import BACKENDS, backend_options

    backend = options.get("backend", "transformers")
    if backend not in BACKENDS:
        raise IkatError(f"unknown LLM backend {backend!r}", where="backend", fix=f"use one of {BACKENDS}")
    unknown = sorted(set(options) - backend_options(backend))
    if unknown:
        raise IkatError(f"unknown option(s) {unknown} for the {backend} backend",
                        fix=f"use only {sorted(backend_options(backend))}")
    _need_model(options)


def _build_llm(name: str, spec: dict[str, Any], where: Where) -> Any:
    from ikatkit.llm import make_llm

    spec.setdefault("cache_dir", str(where.cache_dir / "llm"))
    return make_llm(spec)


def _ranker_kind(kind: str, cache_only: bool = False) -> ResourceKind:
    def check(options: dict[str, Any]) -> None:
        from ikatkit.rank import KINDS as RANKERS

        ranker: type[Any] = RANKERS[kind]
        check_options(ranker.__init__, options)
        _need_model(options)

    def build(name: str, spec: dict[str, Any], where: Where) -> Any:
        from ikatkit.rank import make_ranker

        if kind == "bi-encoder":
            spec.setdefault("cache_dir", str(where.cache_dir / "embeddings"))
        return make_ranker(kind, spec.pop("model"), **spec)

    return ResourceKind(kind, "ranker", check, build, modules=("torch", "sentence_transformers"), models=("model",),
                        cache_only=cache_only, identity=("model",))


def _searcher_class(kind: str) -> Callable[[], type[Any]]:
    """The searcher class an index of ``kind`` builds (:mod:`ikatkit.artifact`)."""
    def found() -> type[Any]:
        from ikatkit.artifact import searcher_class

        return searcher_class(kind)

    return found


def _searcher_kind(kind: str, check: Callable[[dict[str, Any]], None],
                   build: Callable[[str, dict[str, Any], Where], Any], **declared: Any) -> ResourceKind:
    """The resource kind searching an index of ``kind``: its name, searcher class and modules are the index kind's
    (:data:`ikatkit.index.kinds.INDEX_KINDS`); the rest as ``declared``."""
    index = INDEX_KINDS[kind]
    return ResourceKind(index.resource, "searcher", check, build, _searcher_class(kind), modules=index.modules,
                        **declared)


def _open(path: str | Path, kind: str) -> Any:
    from ikatkit.artifact import open_index

    return open_index(path, kind)


def _check_bm25(options: dict[str, Any]) -> None:
    check_options(_searcher_class(BM25)().__init__, options, ("index",))


def _build_bm25(name: str, spec: dict[str, Any], where: Where) -> Any:
    if where.index is None:
        raise IkatError("this config retrieves but no index was given", path=where.config, fix="pass --index DIR")
    return _open(where.index, BM25).searcher(**spec)


def _signed(factory: Callable[..., Any]) -> Callable[..., Any]:
    """What holds a searcher factory's options: a class's ``__init__``, else the function itself."""
    return vars(factory)["__init__"] if isinstance(factory, type) and "__init__" in vars(factory) else factory


def _folder_check(kind: str, folder: str, *searchers: Callable[[], Callable[..., Any]]
                  ) -> Callable[[dict[str, Any]], None]:
    """The option check of a searcher that names its index ``folder`` in ``path``; its options are those of one of
    ``searchers`` (the folder decides which when it opens)."""
    def check(options: dict[str, Any]) -> None:
        if not isinstance(options.get("path"), str):
            raise IkatError(f"a {kind} resource names its index folder", where="path", fix=f'add path = "<{folder}>"')
        errors = []
        for searcher in searchers:
            found = searcher()
            try:
                return check_options(_signed(found), options, ("query_encoder",))
            except IkatError as err:
                errors.append(err)
        raise errors[0]

    return check


_check_dense = _folder_check(DENSE, "folder of ikatkit index dense", _searcher_class(DENSE))


def _build_dense(name: str, spec: dict[str, Any], where: Where) -> Any:
    return _open(spec.pop("path"), DENSE).searcher(index=spec.pop("index", where.index), **spec)


def _hdf5_searcher() -> Callable[..., Any]:
    from ikatkit.artifact import hdf5_searcher

    return hdf5_searcher


def _check_sparse(options: dict[str, Any]) -> None:
    _folder_check(SPARSE, "folder of ikatkit index sparse, an Anserini impact index or the organizers' SPLADE "
                  "index", _searcher_class(SPARSE), _hdf5_searcher)(options)


def _build_sparse(name: str, spec: dict[str, Any], where: Where) -> Any:
    """The searcher of the folder (an impact index or the organizers' SPLADE index: their options differ, checked
    against the one the folder is, so an option of the other is one clear error, not a TypeError)."""
    folder = _open(spec.pop("path"), SPARSE)
    factory = folder.factory()
    check_options(_signed(factory), spec, ("query_encoder",))
    return folder.searcher(**spec)


def _check_partitioned(options: dict[str, Any]) -> None:  # ``partitions``: the folder, else --index
    if not isinstance(options.get("partitions", ""), str):
        raise IkatError(f"partitions = {options['partitions']!r} is not a folder name", where="partitions",
                        fix='write partitions = "<folder of ikatkit index partition>" or pass --index DIR')
    check_options(_searcher_class(PARTITIONS)().__init__,
                  {k: v for k, v in options.items() if k != "partitions"}, ("folder",))


def _build_partitioned(name: str, spec: dict[str, Any], where: Where) -> Any:
    folder = spec.pop("partitions", None) or where.index
    if folder is None:
        raise IkatError(f"resource {name!r} names no partitions folder", path=where.config,
                        fix="add partitions = \"DIR\" or pass --index DIR")
    return _open(folder, PARTITIONS).searcher(**spec)


def _check_texts(options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - {"index", "passages"})
    if unknown:
        raise IkatError(f"unknown option(s) {unknown} for a texts resource", where=unknown[0],
                        fix='use index = "<an index folder storing texts>" or passages = ["<passages JSONL>", ...]')
    if "index" in options and "passages" in options:
        raise IkatError("a texts resource reads an index or passage files, not both", where="passages",
                        fix="keep one of index and passages")
    passages = options.get("passages", [])
    if not isinstance(passages, list) or not all(isinstance(p, str) for p in passages):
        raise IkatError(f"passages = {passages!r} is not a list of files", where="passages",
                        fix='write passages = ["passages.jsonl"]')


def _build_texts(name: str, spec: dict[str, Any], where: Where) -> Any:
    """``texts(ids)`` of an index's stored texts (``index``, else the run's ``--index``) or of passage files."""
    from ikatkit.artifact import open_index
    from ikatkit.index.texts import jsonl_texts

    if spec.get("passages"):
        return jsonl_texts(spec["passages"])
    folder = spec.get("index") or where.index
    if folder is None:
        raise IkatError(f"texts resource {name!r} names no index or passages", path=where.config,
                        fix='add index = "DIR" or passages = ["FILE"], or pass --index DIR')
    return open_index(folder).texts(f"the passage texts of resource {name!r}")


KINDS: dict[str, ResourceKind] = {kind.name: kind for kind in (
    ResourceKind("llm", "llm", _check_llm, _build_llm, backends={"transformers": ("torch", "transformers"),
                                                                 "openai": ("openai",)},
                 default_backend="transformers", option_modules={"adapter": ("peft",)}, models=("model",),
                 files=("adapter",),
                 identity=("model", "adapter")),
    _ranker_kind("bi-encoder", cache_only=True),
    _ranker_kind("cross-encoder"),
    _searcher_kind(BM25, _check_bm25, _build_bm25, needs="a Lucene index (`--index`: the organizers' or your own)"),
    _searcher_kind(DENSE, _check_dense, _build_dense, files=("path", "index"), identity=("path", "index"),
                   needs="a dense index (from `ikatkit index dense`)"),
    _searcher_kind(SPARSE, _check_sparse, _build_sparse, models=("model",), cache_only=True, files=("path",),
                   identity=("path", "model", "max_length"),
                   needs="a learned sparse index (from `ikatkit index sparse`, or the organizers' SPLADE index)"),
    _searcher_kind(PARTITIONS, _check_partitioned, _build_partitioned, files=("partitions",), identity=("partitions",),
                   needs="partitions (`--index`, from `ikatkit index partition`)"),
    ResourceKind("texts", "texts", _check_texts, _build_texts, files=("index",), identity=("index", "passages"),
                 needs="passage texts (an index storing them, `--index`, or passage files)"),
)}
PARAM_KINDS: dict[str, tuple[str, ...]] = {param: tuple(k for k, kind in KINDS.items() if kind.serves == param)
                                           for param in PARAMS}
RANKER_KINDS = PARAM_KINDS["ranker"]  # the re-ranker kinds (`ikatkit search/rerank/context` choices)


def kind_of(spec: Mapping[str, Any]) -> ResourceKind | None:
    """The kind of a resource table (its ``kind``, an alias resolved), None when unknown."""
    kind = spec.get("kind")
    return KINDS.get(canonical(kind)) if isinstance(kind, str) else None


def resource(name: str, spec: Any) -> Resource:
    """One declared resource, checked: a table with a known ``kind`` and options that kind accepts. Errors'
    ``where`` is the key inside the resource's table (``kind``, ``model``, an option), or None for the table."""
    if not isinstance(spec, Mapping):
        raise IkatError(f"resource {name!r} is not a table", fix=f'write [resources.{name}] with kind = "..."')
    found = kind_of(spec)
    if found is None:
        raise IkatError(f"resource {name!r} has unknown kind {spec.get('kind')!r}", where="kind",
                        fix=did_you_mean(str(spec.get("kind")), list(KINDS), f"(the kinds: {list(KINDS)})"))
    kind = found.name
    options = {k: v for k, v in spec.items() if k != "kind"}
    KINDS[kind].check(dict(options))
    return Resource(name, KINDS[kind], options)


def declared(resources: Mapping[str, Any]) -> list[Resource]:
    """The resources of a config's TOML table whose kind is known, as records (unchecked options: the catalogue's
    and preflight's reading of a file)."""
    return [spec if isinstance(spec, Resource) else Resource(name, kind,
                                                             {k: v for k, v in spec.items() if k != "kind"})
            for name, spec in resources.items() if isinstance(spec, Mapping) and (kind := kind_of(spec)) is not None]


def build_resource(name: str, spec: Mapping[str, Any], where: Where) -> Any:
    """The object a declared (and checked) resource stands for."""
    options = {k: v for k, v in spec.items() if k != "kind"}
    kind = kind_of(spec)
    assert kind is not None  # checked when the config loaded
    return kind.build(name, options, where)


def searcher_takes(kind: str | None, argument: str) -> bool:
    """Whether the searcher of resource ``kind`` accepts ``argument`` in ``batch_search`` (e.g. ``partitions``)."""
    found = KINDS.get(kind or "")
    if found is None or found.searcher_class is None:
        return False
    return argument in inspect.signature(found.searcher_class().batch_search).parameters


def stage_resources(cls: type[Stage], options: dict[str, Any],
                    resources: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """The resource each resource parameter of stage ``cls`` uses: the one ``options`` names, else the only
    declared resource of a fitting kind (None when the parameter is optional and none fits). Errors' ``where``
    is the parameter."""
    accepted = inspect.signature(cls.__init__).parameters
    chosen: dict[str, str | None] = {}
    for param in PARAMS:
        if param not in accepted:
            continue
        if param == "texts":
            chosen[param] = _texts_resource(cls, options, resources)
            continue
        fitting = [n for n, spec in resources.items() if (kind := kind_of(spec)) and kind.name in PARAM_KINDS[param]]
        if param in options:
            name = options[param]
            if name not in resources:
                raise IkatError(f"{param} {name!r} is not a declared resource", where=param,
                                fix=did_you_mean(name, fitting or resources) or f"declare [resources.{name}]")
            if name not in fitting:
                raise IkatError(f"{param} {name!r} is a {resources[name].get('kind')!r} resource", where=param,
                                fix=f"name a resource of kind {list(PARAM_KINDS[param])}")
            chosen[param] = name
            continue
        required = accepted[param].default is inspect.Parameter.empty
        if len(fitting) > 1 or (required and not fitting):
            raise IkatError(f"{len(fitting)} resources fit {param!r} of stage {cls.name!r}; name the one it uses",
                            fix=f'add {param} = "<resource name>" to the stage'
                            + ("" if fitting else f" and declare a resource of kind {list(PARAM_KINDS[param])}"))
        chosen[param] = fitting[0] if fitting else None
    return chosen


def _texts_resource(cls: type[Stage], options: dict[str, Any], resources: Mapping[str, Mapping[str, Any]]) -> str:
    """The resource whose passage texts a stage reads: the one ``texts`` names (a ``texts`` resource, or a searcher:
    its index's texts; ``searcher`` as configs wrote it before), else the only ``texts`` resource, else the only
    searcher. Errors' ``where`` is ``texts``."""
    def serving(what: str) -> list[str]:
        return [n for n, spec in resources.items() if (kind := kind_of(spec)) and kind.serves == what]

    texts, searchers = serving("texts"), serving("searcher")
    name = options.get("texts", options.get("searcher"))
    if name is not None:
        if name not in resources:
            raise IkatError(f"texts {name!r} is not a declared resource", where="texts",
                            fix=did_you_mean(name, texts + searchers or list(resources))
                            or f"declare [resources.{name}]")
        if name not in texts + searchers:
            raise IkatError(f"texts {name!r} is a {resources[name].get('kind')!r} resource", where="texts",
                            fix='name a resource of kind "texts", or a searcher (its index\'s texts)')
        return name
    if len(texts) == 1:
        return texts[0]
    fitting = texts or searchers
    if len(fitting) != 1:
        raise IkatError(f"{len(fitting)} resources fit 'texts' of stage {cls.name!r} (the passage texts it reads); "
                        "name the one it uses", where="texts",
                        fix='add texts = "<resource name>" to the stage' + ("" if fitting else
                                                                           ' and declare [resources.texts] kind = '
                                                                           '"texts" (or a searcher)'))
    return fitting[0]


def texts_of(resource: Resource, built: Any) -> Any:
    """What a stage's ``texts`` parameter gets of a built resource: a texts resource itself, a searcher's texts."""
    return built.texts if resource.kind.serves == "searcher" else built

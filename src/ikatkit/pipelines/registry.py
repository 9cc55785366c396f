"""The stage registry: stage classes register themselves by name with :func:`register`.

Every stage, ikatkit's own included, comes through the ``ikatkit.stages`` entry point group
(:data:`ENTRY_POINT_GROUP`), loaded on the first lookup, not before, so importing a stage module never imports the
others and the registry names no stage module. Each entry point names a module whose classes use :func:`register`,
a :class:`~ikatkit.pipelines.base.Stage` class itself, or a sequence of them, e.g. in the plugin's
``pyproject.toml``::

    [project.entry-points."ikatkit.stages"]
    echo_query = "my_package.stages:EchoQuery"

ikatkit's own entry point ``builtin`` names :data:`ikatkit.stages.builtin.MODULES`: its stages are listed first, in
that order. The entry point's name should be the stage's: an entry point that does not load is reported by
``ikatkit stages`` and when a config names it (:func:`broken_entry_points`), and never stops the other stages from
loading.

Adding a built-in stage: ``@register`` on its class, in a module of :mod:`ikatkit.stages` listed in
``ikatkit/stages/builtin.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, TypeVar

from ikatkit.errors import IkatError
from ikatkit.suggest import did_you_mean
from ikatkit.pipelines.base import Stage

ENTRY_POINT_GROUP = "ikatkit.stages"
DISTRIBUTION = "ikatkit"  # whose entry points come first

S = TypeVar("S", bound=type)
_registered: dict[str, type[Stage]] = {}
_broken: dict[str, IkatError] = {}  # entry point name -> why it did not load
_order: list[str] = []  # the modules listed by entry points, in their order (stages are listed in that order)
_loaded = False


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register(cls: S) -> S:
    """Class decorator: make ``cls`` (a :class:`Stage` with a ``name``) available to configs under its name."""
    if not (isinstance(cls, type) and issubclass(cls, Stage)):
        raise IkatError(f"{cls!r} is not a Stage subclass", where=ENTRY_POINT_GROUP,
                        fix="derive the stage class from ikatkit.pipelines.base.Stage")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name:
        raise IkatError(f"stage class {_qualname(cls)} has no name", fix='give it a class attribute name = "..."')
    for attribute in ("requires", "ordered", "optional", "provides", "single_list_provides"):
        if not isinstance(getattr(cls, attribute), tuple):
            raise IkatError(f"{attribute} of stage {name!r} is not a tuple of record fields",
                            fix=f"write {attribute} = (\"field\", ...)")
    known = _registered.get(name)
    if known is not None and _qualname(known) != _qualname(cls):
        raise IkatError(f"two stages are named {name!r}: {_qualname(known)} and {_qualname(cls)}",
                        fix="give one of them another name")
    _registered[name] = cls
    return cls


def _own(point: EntryPoint) -> bool:
    return point.dist is not None and point.dist.name == DISTRIBUTION


def _add(found: object) -> None:
    """What an entry point names: a module (its classes registered themselves on import), a Stage class, or a
    sequence of them (their order is the listing order)."""
    for item in found if isinstance(found, (list, tuple)) else (found,):
        if isinstance(item, ModuleType):
            _order.append(item.__name__)
        elif isinstance(item, type):
            register(item)
            _order.append(item.__module__)


def _load() -> None:
    """Load the entry points' stages, ikatkit's own first (once)."""
    global _loaded
    if _loaded:
        return
    points = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda point: not _own(point))
    if not any(_own(point) for point in points):
        raise IkatError(f"ikatkit's own stages are not registered: no installed metadata has its {ENTRY_POINT_GROUP} "
                        "entry point. Entry points come from an install, so a source tree run without one "
                        "(PYTHONPATH=src) has none, nor has an install older than the code", where=ENTRY_POINT_GROUP,
                        fix="install ikatkit (`make setup`, or `pip install -e .` in the checkout); commands that "
                            "run no stage work without it")
    for point in points:
        try:
            _add(point.load())
        except Exception as err:  # a broken plugin names itself, whatever it raised
            _broken[point.name] = IkatError(
                f"the stage entry point {point.name!r} ({point.value}) does not load: {type(err).__name__}: {err}",
                where=ENTRY_POINT_GROUP, fix="install what it needs, or uninstall the package that declares it")
    _loaded = True


def broken_entry_points() -> list[IkatError]:
    """Why each ``ikatkit.stages`` entry point that does not load failed (empty when all load)."""
    _load()
    return list(_broken.values())


def stages() -> dict[str, type[Stage]]:
    """Every registered stage by name: those of the modules entry points list, in that order (ikatkit's own
    first), then the others."""
    _load()
    order = {module: i for i, module in reversed(list(enumerate(_order)))}
    names = list(_registered)
    return {name: _registered[name] for name in sorted(
        names, key=lambda n: (order.get(_registered[n].__module__, len(order)), names.index(n)))}


def stage_names() -> tuple[str, ...]:
    return tuple(stages())


def stage_class(name: str) -> type[Stage]:
    """The stage class registered as ``name``, or one IkatError listing the known names."""
    found = stages().get(name)
    if found is None and name in _broken:
        raise _broken[name]
    if found is None:
        raise IkatError(f"unknown stage {name!r}", where="stage",
                        fix=did_you_mean(name, _registered, f"use one of {sorted(_registered)} (`ikatkit stages` "
                                                            "lists them)"))
    return found


def stage_table() -> list[dict[str, Any]]:
    """One row per registered stage: its name, class, first docstring line and declared fields (what
    ``ikatkit stages`` prints and the docs' stage reference is generated from)."""
    rows = []
    for name, cls in stages().items():
        doc = (cls.__doc__ or "").strip()
        rows.append({"name": name, "class": _qualname(cls), "summary": " ".join(doc.split("\n\n")[0].split()),
                     "requires": list(cls.requires), "ordered": list(cls.ordered), "optional": list(cls.optional),
                     "provides": list(cls.provides), "single_list_provides": list(cls.single_list_provides)})
    return rows


class _Stages(Mapping[str, type[Stage]]):
    """A read-only view of the registry, loaded on first use (``STAGES["rewrite"]``)."""

    def __getitem__(self, name: str) -> type[Stage]:
        return stages()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(stages())

    def __len__(self) -> int:
        return len(stages())


STAGES: Mapping[str, type[Stage]] = _Stages()

"""The official run formats, read from ``submission_templates/<year>.json[l]`` inside the package (the
project's top-level ``submission_templates/`` holds the same files for people to read; a test keeps them equal).

Each template file holds a small sample run in the year's official format plus a ``_template`` object
(its own line in JSON Lines) with field notes and the rules the structure must follow. From the sample
we derive every field's type and the key order of every object; writers order their output by it and the
validator checks files against it, so the template files are the single description of each format.

Field paths name keys with dots and list items with ``[]``: ``turns[].responses[].rank``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ikatkit import jsonl
from ikatkit.errors import IkatError

SUFFIX = {2023: ".json", 2024: ".json", 2025: ".jsonl"}
# Every format a template describes: the official offline formats by year, and the interactive runs as the
# organizers released them (2025) and the 2026 rules of the same shape.
TEMPLATE_FILES = {"2023": "2023.json", "2024": "2024.json", "2025": "2025.jsonl",
                  "2025-interactive": "2025-interactive.jsonl", "2026-interactive": "2026-interactive.jsonl"}
TYPE_NAMES = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
              "list": "a list", "object": "an object", "map": "an object id -> score"}


def templates_dir() -> Path:
    """``$IKATKIT_TEMPLATES`` or the templates shipped in the package (``ikatkit/submission_templates``)."""
    env = os.environ.get("IKATKIT_TEMPLATES")
    return Path(env) if env else Path(str(resources.files("ikatkit") / "submission_templates"))


@dataclass(frozen=True)
class Spec:
    """The type of one field path; ``keys`` are an object's keys in official order."""

    kind: str
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShapeIssue:
    """A structural problem: ``kind`` is missing-required, missing, type or unknown."""

    kind: str
    pattern: str
    where: str
    message: str


@dataclass(frozen=True)
class Template:
    """One official format: sample records, notes, rules and the derived field specs (``name``: 2023, 2024, 2025
    or 2025-interactive; ``year``: its year)."""

    year: int
    path: Path
    rules: dict[str, Any]
    samples: tuple[dict[str, Any], ...]
    specs: dict[str, Spec] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.rules.get("format", self.year))

    def limit(self, kind: str, pattern: str) -> int:
        """The template's ``max_items`` / ``max_words`` / ``max_tokens`` value for ``pattern``."""
        return int(self.rules[kind][pattern])

    @property
    def jsonl(self) -> bool:
        return self.path.suffix == ".jsonl"

    @property
    def notes(self) -> dict[str, str]:
        return dict(self.rules.get("notes", {}))

    def rule(self, name: str, default: Any = None) -> Any:
        return self.rules.get(name, default)

    def has(self, pattern: str) -> bool:
        return pattern in self.specs

    def kind(self, pattern: str) -> str:
        return self.specs[pattern].kind

    def ordered(self, pattern: str, values: dict[str, Any]) -> dict[str, Any]:
        """The object at ``pattern`` with the template's keys in the template's order, taken from ``values``.

        Keys the year's format lacks are dropped; a key the format has but ``values`` lacks is a bug.
        """
        keys = self.specs[pattern].keys
        missing = [k for k in keys if k not in values]
        if missing:
            raise IkatError(f"writer gave no value for {[_join(pattern, k) for k in missing]}", path=self.path,
                            fix="the writer and the template disagree; update ikatkit.runs.io")
        return {k: values[k] for k in keys}

    def check(self, record: Any, where: str = "") -> list[ShapeIssue]:
        """Every structural problem of one record (the whole run, or one JSONL line) against the specs."""
        issues: list[ShapeIssue] = []
        self._check(record, "", where, issues)
        return issues

    def _check(self, value: Any, pattern: str, where: str, issues: list[ShapeIssue]) -> None:
        spec = self.specs[pattern]
        if value is None and pattern in self.rule("nullable", []):
            return
        if not _is_kind(value, spec.kind):
            found = _json_type(value)
            issues.append(ShapeIssue("type", pattern, where or "top level",
                                     f"{pattern or 'the record'} is {found}, expected {TYPE_NAMES[spec.kind]}"))
            return
        if spec.kind == "list" and _join(pattern, "[]") in self.specs:
            for i, item in enumerate(value):
                self._check(item, pattern + "[]", f"{where}[{i}]", issues)
        elif spec.kind == "map":
            item_kind = self.specs[pattern + "{}"].kind
            for key, item in value.items():
                if not _is_kind(item, item_kind):
                    issues.append(ShapeIssue("type", pattern, f"{where}[{key!r}]",
                                             f"{pattern} values must be {TYPE_NAMES[item_kind]}, "
                                             f"found {_json_type(item)}"))
        elif spec.kind == "object":
            for key in spec.keys:
                child = _join(pattern, key)
                if key in value:
                    self._check(value[key], child, _join(where, key), issues)
                elif child in self.rule("required", []):
                    issues.append(ShapeIssue("missing-required", child, where or "top level",
                                             f"required field {child!r} is missing"))
                elif child not in self.rule("optional", []):
                    issues.append(ShapeIssue("missing", child, where or "top level",
                                             f"field {child!r} is missing (read as empty)"))
            for key in value:
                if key not in spec.keys:
                    issues.append(ShapeIssue("unknown", _join(pattern, key), where or "top level",
                                             f"unknown field {_join(pattern, key)!r}"))


def _join(pattern: str, key: str) -> str:
    if key == "[]":
        return pattern + "[]"
    return f"{pattern}.{key}" if pattern else key


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind in ("bool", "int", "float", "str", "list"):
        if _is_kind(value, kind):
            return TYPE_NAMES[kind]
    return "an object" if isinstance(value, dict) else type(value).__name__


def _is_kind(value: Any, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":  # protobuf's JSON mapping, used by the 2023/2024 validators, also takes "13"
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit())
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, list)
    return isinstance(value, dict)


def _derive(value: Any, pattern: str, maps: set[str], specs: dict[str, Spec]) -> None:
    if pattern in maps:
        specs[pattern] = Spec("map")
        specs[pattern + "{}"] = Spec(_scalar_kind(next(iter(value.values()))))
    elif isinstance(value, dict):
        specs[pattern] = Spec("object", tuple(value))
        for key, item in value.items():
            _derive(item, _join(pattern, key), maps, specs)
    elif isinstance(value, list):
        specs[pattern] = Spec("list")
        if value:
            _derive(value[0], pattern + "[]", maps, specs)
    else:
        specs[pattern] = Spec(_scalar_kind(value))


def _scalar_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float", str: "str"}[type(value)]


def load_template(fmt: int | str) -> Template:
    """The template of ``fmt`` (2023, 2024, 2025, 2025-interactive or 2026-interactive) with its field specs derived
    from the sample."""
    return _load_template(str(fmt))


@cache
def _load_template(fmt: str) -> Template:
    if fmt not in TEMPLATE_FILES:
        raise IkatError(f"no official run format {fmt!r}", fix=f"use one of {sorted(TEMPLATE_FILES)}")
    path = templates_dir() / TEMPLATE_FILES[fmt]
    if not path.is_file():
        raise IkatError("submission template not found", path=path,
                        fix="reinstall ikatkit, or set IKATKIT_TEMPLATES to a folder of templates")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records = [value for _, value in jsonl.records(text.splitlines())]
    else:
        records = [json.loads(text)]
    rules = records[0].pop("_template")
    samples = tuple(r for r in records if r)
    specs: dict[str, Spec] = {}
    _derive(samples[0], "", set(rules.get("maps", [])), specs)
    return Template(int(rules.get("year", fmt[:4])), path, rules, samples, specs)

"""The configs ikatkit ships (``configs/*.toml``, inside the package as ``ikatkit/data/configs``): what each needs
(a GPU, hub models, an LLM server, an index, extras) and whether it runs offline on a CPU, read from the configs
themselves by the same reading the preflight checks (:func:`ikatkit.pipelines.preflight.config_needs`) and the
resource kinds' declarations (:class:`ikatkit.pipelines.resources.ResourceKind`).

``ikatkit configs`` prints it, ``ikatkit configs copy NAME DIR`` copies a config out of the package, and
``docs/configs.md``'s table is generated from it (:mod:`ikatkit.docgen`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from ikatkit.atomic import write_text
from ikatkit.errors import IkatError
from ikatkit.extras import EXTRAS

@dataclass(frozen=True)
class Entry:
    """One shipped config: its file name, description, needs, extras, and whether it runs offline on a CPU."""

    file: str
    description: str
    needs: tuple[str, ...]
    extras: tuple[str, ...]
    offline_cpu: bool


def folder() -> Path:
    """The shipped configs' folder (the checkout's ``configs/`` in an editable install)."""
    return Path(str(files("ikatkit") / "data" / "configs"))


def shipped() -> dict[str, Path]:
    """Config name (file stem) -> file, in name order."""
    return {path.stem: path for path in sorted(folder().glob("*.toml"))}


def entry(path: Path) -> Entry:
    """What the config at ``path`` needs, read from its TOML."""
    from ikatkit.pipelines.preflight import OPENAI_URL, config_needs
    from ikatkit.pipelines.resources import declared

    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    found = config_needs(raw)
    needs = [f"GPU ({option})" for _, option in found.gpu]
    if found.hub_models:
        needs.append("hub models: " + ", ".join(found.hub_models))
    needs += ["LLM server: " + ("the OpenAI API (OPENAI_API_KEY) or an OpenAI-compatible one (base_url)"
                                if url == OPENAI_URL else url) for _, url, _ in found.servers]
    resources = declared(raw.get("resources", {}))
    needs += [kind.needs for kind in dict.fromkeys(r.kind for r in resources) if kind.needs]
    covered = {name for r in resources if r.kind.needs for name in r.files()}  # the index its needs line names
    needs += [f"file: {name}" for name in dict.fromkeys(found.files) if name not in covered]
    extras = {EXTRAS[m] for m in found.modules if m in EXTRAS} | ({"gpu"} if found.gpu else set())
    return Entry(path.name, str(raw.get("description", "")), tuple(needs), tuple(sorted(extras)),
                 not (found.gpu or found.hub_models or found.servers))


def catalogue() -> list[Entry]:
    return [entry(path) for path in shipped().values()]


def copy_configs(names: list[str], dest: str | Path) -> list[Path]:
    """Copy the shipped configs ``names`` (stems or file names; ``all``) into folder ``dest``; an existing file
    with other content is left alone (one error naming it)."""
    known = shipped()
    chosen = list(known) if names == ["all"] else [Path(n).stem for n in names]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise IkatError(f"no shipped config {unknown[0]!r}", fix=f"use one of {list(known)} or all")
    dest = Path(dest)
    written = []
    for name in chosen:
        target = dest / known[name].name
        data = known[name].read_text(encoding="utf-8")
        if target.exists() and target.read_text(encoding="utf-8") != data:
            raise IkatError("a different file is already there", path=target,
                            fix="remove it or copy into another folder")
        write_text(target, data)
        written.append(target)
    return written


def markdown_table() -> str:
    """The catalogue as a Markdown table (docs/configs.md)."""
    rows = ["| config | offline, CPU | needs | extras | what |", "| --- | --- | --- | --- | --- |"]
    for e in catalogue():
        rows.append(f"| `{e.file}` | {'yes' if e.offline_cpu else 'no'} | {'; '.join(e.needs) or '-'} | "
                    f"{', '.join(e.extras) or '-'} | {e.description.replace('|', '/')} |")
    return "\n".join(rows)


def text_listing() -> str:
    """The catalogue for a terminal: each config's line of needs under its name and description."""
    lines = []
    entries = catalogue()
    width = max((len(e.file) for e in entries), default=0)
    for e in entries:
        lines += [f"{e.file:<{width}} {'offline, CPU' if e.offline_cpu else 'needs more':<13} {e.description}",
                  f"{'':<{width}} {'':<13} needs: {'; '.join(e.needs) or 'nothing more'}; "
                  f"extras: {', '.join(e.extras) or 'none'}"]
    return "\n".join(lines + [f"\n{folder().resolve()}", "copy one to edit it: ikatkit configs copy NAME DIR"])

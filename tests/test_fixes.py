"""Every fix ikatkit prints that names an option is a command that works: the option exists in a command that can
print it (the commands whose handlers import, directly or not, the module that holds the fix), or in the
`ikatkit ...` command the fix quotes. The parsers are the real ones (``ikatkit.cli.build_parser``)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from cli_options import COMMAND, OPTION, command_of, missing, options, parsers
from import_graph import SRC, import_graph

# options of other programs that fixes name (outside backticks)
FOREIGN = {"--lora-modules": "vLLM's option serving a LoRA adapter (llm/openai_backend.py)",
           "--force-reinstall": "pip's (models.py: reinstall a bundled model's package)"}
OTHER = re.compile(r"`(?!-)[^`]*`")  # a backticked command of another program (`ray start --head`)


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in (SRC / "ikatkit").rglob("*.py")}
GRAPH = import_graph()  # modules loaded by name (a searcher's ``module:Class``) included
GRAPH["ikatkit.pipelines.registry"].add("ikatkit.stages.builtin")  # the stages come by entry point, not import


def _reached(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            parts = name.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))] + sorted(GRAPH[name])
    return seen


def _fixes() -> list[tuple[str, int, str]]:
    """(module, line, text) of every ``fix=`` (and ``where=``) argument naming an option: its string parts joined
    (an f-string's constants)."""
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg in ("fix", "where"):  # where="--qrels": the option the error is about
                        text = " ".join(n.value for n in ast.walk(keyword.value)
                                        if isinstance(n, ast.Constant) and isinstance(n.value, str))
                        if OPTION.search(text):
                            found.append((name, node.lineno, text))
    return found


def _commands_by_module() -> dict[str, set[tuple[str, ...]]]:
    """The commands (their words) whose handler is defined in each module of ikatkit.commands."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for words, parser in parsers().items():
        # a subcommand without a handler of its own runs its group's (`index build`: `index`'s)
        func = next((parsers()[words[:n]].get_default("func") for n in range(len(words), 0, -1)
                     if parsers()[words[:n]].get_default("func") is not None), None)
        if func is not None:
            found.setdefault(inspect.getmodule(func).__name__, set()).add(words)
    return found


def test_every_fix_naming_an_option_names_one_of_a_command_that_prints_it():
    commands = _commands_by_module()
    reach = {module: _reached(module) for module in commands}
    fixes = _fixes()
    assert len(fixes) > 80  # the walk sees them (and the f-strings' parts)
    wrong = []
    for module, line, text in fixes:
        for quoted in COMMAND.findall(text):  # `ikatkit index dense ... --out DIR`: that command's options
            named, rest = command_of(quoted)
            wrong += [f"{module}:{line}: `ikatkit {' '.join(named)}` has no {o}" for o in OPTION.findall(rest)
                      if o not in options(named)]
        owners = sorted(words for m, found in commands.items() if module in reach[m] for words in found)
        assert owners, f"{module}:{line}: no command reaches this fix"
        outside = [o for o in OPTION.findall(OTHER.sub("", COMMAND.sub("", text))) if o not in FOREIGN]
        wrong += [f"{module}:{line}: no command that prints it has {o} ({text!r})" for o in outside
                  if not any(o in options(words) for words in owners)]
    assert wrong == []


def test_the_session_store_fix_is_the_driving_commands():
    """The fix of an output folder of other inputs: `run` offers --restart, `interactive`, `demo` and `robustness`
    have none (an interactive run's turns were sent under its run id: a new one too)."""
    from ikatkit.interactive.driver import FRESH
    from ikatkit.pipelines.session.store import TurnStore

    assert missing(FRESH, ("interactive",)) == [] and "--run-id" in FRESH
    assert missing(TurnStore(Path("x"), "turns").fresh, ("demo",)) == []
    assert missing(TurnStore(Path("x"), "turns").fresh, ("robustness",)) == []

"""The ``ikatkit`` command: thin argument parsing over the same functions as the Python API.

Each command group is a module of :mod:`ikatkit.commands` whose ``add(sub)`` registers its parsers and sets
``func`` to a handler returning the exit code. Heavy modules are imported inside the handlers, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from ikatkit import __version__
from ikatkit.commands import (configs, context, dialogues, evaluate, finetune, index, interactive, matcher, partition,
                              persona, ptkb_classifier, robustness, run, runs, search, simulate, stages, topics,
                              view)
from ikatkit.errors import IkatError
from ikatkit.extras import as_error
from ikatkit.models import quiet_model_loading
from ikatkit.suggest import did_you_mean
from ikatkit.stopping import Stopped, handling_stops, received, resume_command


def shown_default(action: argparse.Action) -> str | None:
    """An argument's default as ``--help`` and docs/cli.md show it; None where there is none to show (no value, a
    flag)."""
    default = action.default
    return None if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else str(default)


class _Help(argparse.HelpFormatter):
    """argparse's help, each option's default after its text unless the text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = shown_default(action)
        if default is None or "default" in text.lower() or text == argparse.SUPPRESS:
            return text
        return f"{text} (default: {default.replace('%', '%%')})"

    def _format_action(self, action: argparse.Action) -> str:
        default = shown_default(action)
        if not (action.help or "").strip() and default is not None:  # argparse shows no line for an empty help
            action = copy.copy(action)
            action.help = f"default: {default.replace('%', '%%')}"
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """The ``ikatkit`` parsers (every subcommand's too): defaults in ``--help``; a mistyped choice (a command,
    ``--format tsvv``) answered with the close ones."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices:
            fix = did_you_mean(str(value), [str(c) for c in choices])
            listed = ", ".join(map(repr, choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}" + (f" — {fix}" if fix else "")
                                         + f" (choose from {listed})")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ikatkit", description="TREC iKAT toolkit: topics, indexes, pipelines, runs, validation, evaluation.")
    parser.add_argument("--version", action="version", version=f"ikatkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_model_loading()
    try:
        code = _run(args)
    except Stopped as stop:
        code, name = stop.code, str(stop)
    else:
        return code
    gc.collect()  # the stopped frames' progress bars print their last state now, not after the resume line
    again = resume_command(sys.argv[1:] if argv is None else argv)
    on_stop = getattr(args, "on_stop", None)  # a command whose stop leaves something else to say
    print(f"ikatkit: stopped by {name}; " + (on_stop(args, again) if on_stop else f"to resume, rerun: {again}"),
          file=sys.stderr)
    if argv is None:  # the process's own command: its exit hooks (Ray's shutdown) run, then it ends without the
        atexit._run_exitfuncs()  # interpreter's teardown (collecting torch's and the JVM's objects takes seconds)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(args: argparse.Namespace) -> int:
    """The command's exit code; errors as one line (2); a stop (SIGINT, SIGTERM) raised as ``Stopped``."""
    try:
        with handling_stops():
            try:
                code = int(args.func(args) or 0)
            except Exception as err:
                signum = received()
                if signum is None:
                    raise
                raise Stopped(signum) from err  # a child process that the same Ctrl-C stopped failed first
        sys.stdout.flush()
        return code
    except (IkatError, ModuleNotFoundError) as err:  # a module of an extra that is not installed: the extra named
        print(f"ikatkit: error: {err if isinstance(err, IkatError) else as_error(err)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`ikatkit index get ... | head`): end quietly, as a killed `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    topics.add,
    runs.add,
    evaluate.add,
    index.add,
    search.add,
    run.add,
    finetune.add,
    partition.add,
    context.add,
    stages.add,
    persona.add,
    matcher.add,
    interactive.add,
    simulate.add,
    ptkb_classifier.add,
    dialogues.add,
    robustness.add,
    configs.add,
    view.add,
]

if __name__ == "__main__":
    sys.exit(main())

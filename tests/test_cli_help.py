"""The parsers of every command: a mistyped command or choice gets the close ones, and --help shows each option's
default (one formatter, cli._Help; docs/cli.md's default column comes from the same cli.shown_default)."""

from __future__ import annotations

import argparse

import pytest

from ikatkit.cli import build_parser, main, shown_default


def test_a_mistyped_command_gets_a_did_you_mean(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["evl", "run.trec"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "ikatkit: error: argument command: invalid choice: 'evl' — did you mean 'eval'? (choose from 'topics', ")
    with pytest.raises(SystemExit):
        main(["eval", "run.trec", "--qrels", "q", "--format", "tsvv"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "ikatkit eval: error: argument --format: invalid choice: 'tsvv' — did you mean 'tsv'? (choose from 'tsv', "
        "'json')")


def _help(*command: str) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])


def test_help_shows_every_default(capsys):
    _help("eval")
    text = " ".join(capsys.readouterr().out.split())
    assert "--missing {skip,zero} judged turns the run lacks: left out (as trec_eval) or counted as 0 (default: skip)" \
        in text
    assert "(rubrics reached / rubrics) beside every mean (default: run)" in text  # --by
    assert "(default: compare types over what each reached)" in text and "(default: skip)" not in text.split(
        "--unreached")[1].split("--rubric-turn")[0]  # a help that says its default is left as written
    _help("index", "sparse")
    assert "(default: naver/splade-cocondenser-ensembledistil)" in " ".join(capsys.readouterr().out.split())


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield parser, action


def test_every_option_with_a_default_says_it_in_help():
    shown = 0
    for parser, action in _actions(build_parser()):
        default = shown_default(action)
        if default is None or action.help == argparse.SUPPRESS:
            continue
        text = parser._get_formatter()._format_action(action)
        assert "default" in text.lower(), (parser.prog, action.option_strings)
        shown += 1
    assert shown > 100

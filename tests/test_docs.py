"""The docs: generated pages match the code, and every relative link points to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ikatkit import docgen

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", sorted(docgen.pages()))
def test_generated_pages_are_current(name):
    page = DOCS / name
    assert page.exists(), f"{page} missing: run python -m ikatkit.docgen"
    assert page.read_text(encoding="utf-8") == docgen.pages()[name], f"{page} is stale: run python -m ikatkit.docgen"


def test_generated_pages_name_every_subcommand_and_stage():
    """Independent of docgen's own walk: the subcommands argparse knows and the stage table's names all appear."""
    import argparse

    from ikatkit.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    cli = docgen.pages()["cli.md"]
    for name, parser in subparsers.choices.items():
        assert f"## `ikatkit {name}`" in cli
        for action in parser._actions:
            for option in action.option_strings if not isinstance(action, argparse._HelpAction) else ():
                assert f"`{option}`" in cli, (name, option)
    stages = docgen.pages()["stages.md"]
    for name, cls in docgen.stage_table().items():
        row = next(line for line in stages.splitlines() if line.startswith(f"| `{name}` |"))
        assert all(f"`{field}`" in row for field in (*cls.requires, *cls.provides)), row


def test_check_mode_reports_a_stale_page(tmp_path, capsys):
    for name, content in docgen.pages().items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 0
    (tmp_path / "stages.md").write_text("old\n", encoding="utf-8")
    assert docgen.main(["--check", "--docs", str(tmp_path)]) == 1
    assert "stages.md" in capsys.readouterr().err
    assert (tmp_path / "stages.md").read_text() == "old\n"  # --check writes nothing


def test_relative_links_point_to_existing_files():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path = target.split("#")[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            resolved = (page.parent / path).resolve()
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of ``page``'s headings (code blocks skipped; a repeated heading gets -1, -2 ...)."""
    seen: dict[str, int] = {}
    found = set()
    code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            code = not code
        heading = None if code else re.match(r"#{1,6} (.+)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def test_anchors_are_githubs(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# One query on every core (issue 53)\n```sh\n# a comment\n```\n## `ikatkit eval-matcher`\n"
                    "## Results\n### Results\n", encoding="utf-8")
    assert anchors(page) == {"one-query-on-every-core-issue-53", "ikatkit-eval-matcher", "results", "results-1"}


def test_anchors_of_relative_links_exist():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path, _, fragment = target.partition("#")
            if not fragment or re.match(r"[a-z]+:", path):
                continue
            resolved = (page.parent / path).resolve() if path else page
            if resolved.suffix == ".md" and fragment not in anchors(resolved):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_readme_is_short_and_the_index_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    assert "make demo" in readme and "make test" in readme and "docs/index.md" in LINK.findall(readme)
    indexed = {Path(t).name for t in LINK.findall((DOCS / "index.md").read_text(encoding="utf-8"))}
    assert not {p.name for p in DOCS.glob("*.md")} - indexed - {"index.md"}


def test_development_layout_matches_the_tree():
    """docs/development.md's layout names every package of src/ikatkit, and everything it names exists."""
    page = (DOCS / "development.md").read_text(encoding="utf-8")
    block = page.split("## Layout", 1)[1].split("```", 2)[1]
    src = ROOT / "src" / "ikatkit"
    named = set(re.findall(r"^  (\S+?/|\S+?\.py)\s", block, flags=re.MULTILINE))
    packages = {p.parent.name + "/" for p in src.glob("*/__init__.py")}
    assert not packages - named, f"packages missing from the layout: {sorted(packages - named)}"
    assert all((src / name).exists() for name in named), sorted(n for n in named if not (src / n).exists())
    tops = set(re.findall(r"^(\S+/)\s", block, flags=re.MULTILINE)) - {"src/ikatkit/"}
    assert tops and all((ROOT / name).is_dir() for name in tops), tops


# --- docs/first-project.md: what its commands print, line for line -------------------------------------------------

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")  # times vary with the machine; everything else must not


def _command_outputs(page: Path) -> list[tuple[list[str], str]]:
    """Each ``bash`` block's ikatkit commands (continuation lines joined) and the ``text`` block after it: what they
    print to stdout."""
    blocks = [(kind, body) for kind, body in FENCE.findall(page.read_text(encoding="utf-8"))]
    pairs = []
    for (kind, body), (next_kind, printed) in zip(blocks, blocks[1:]):
        commands = [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip().startswith("ikatkit ")]
        if kind == "bash" and next_kind == "text" and commands:
            pairs.append((commands, printed))
    return pairs


@pytest.mark.slow
def test_first_project_prints_what_the_page_quotes(ikat2023, tmp_path, monkeypatch, capsys):
    """Every command of docs/first-project.md, run as written (``$DATA`` the 2023 data) in a fresh folder, prints
    the lines the page quotes after it, in order, but for the seconds it took."""
    import shlex

    from ikatkit.cli import main

    pairs = _command_outputs(DOCS / "first-project.md")
    assert [c.split()[1] for commands, _ in pairs for c in commands] == [
        "index", "run", "run", "eval", "eval", "compare", "report"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    for commands, quoted in pairs:
        printed = ""
        for command in commands:
            args = shlex.split(command.replace("$DATA", str(ikat2023)))[1:]
            assert main(args) == 0, command
            printed += capsys.readouterr().out
        assert SECONDS.sub("T s", printed).splitlines() == SECONDS.sub("T s", quoted).splitlines(), commands


# --- docs/rehearsal-2026.md: the same, with shell lines and the simulator in the background ------------------------

HEREDOC = re.compile(r"<<-?'?(\w+)'?")


def _steps(body: str) -> list[tuple[str, str]]:
    """A ``bash`` block's lines in order as ``(kind, line)``: kind ``ikatkit`` (a command, continuation lines joined,
    as :func:`_command_outputs` reads it), ``export`` or ``sh`` (any other line, a here-document with its lines);
    blank lines and comments left out."""
    lines = body.replace("\\\n", " ").splitlines()
    steps = []
    while lines:
        line = lines.pop(0).strip()
        if not line or line.startswith("#"):
            continue
        if here := HEREDOC.search(line):
            end = lines.index(here[1]) + 1
            line, lines = "\n".join([line, *lines[:end]]), lines[end:]
        steps.append((line.split()[0] if line.split()[0] in ("ikatkit", "export") else "sh", line))
    return steps


def test_steps_keep_the_order_and_a_here_document_whole():
    body = ("mkdir -p a\ncat > a/x.toml <<'EOF'\nu1 = 9\n# not a comment here\nEOF\nexport R=a T=b\n"
            "ikatkit simulate --topics $T \\\n    --port 1 &\n")
    assert _steps(body) == [("sh", "mkdir -p a"), ("sh", "cat > a/x.toml <<'EOF'\nu1 = 9\n# not a comment here\nEOF"),
                            ("export", "export R=a T=b"), ("ikatkit", "ikatkit simulate --topics $T      --port 1 &")]


@pytest.mark.slow
def test_rehearsal_2026_prints_what_the_page_quotes(ikat2023, tmp_path, monkeypatch, capsys):
    """Every command of docs/rehearsal-2026.md, run as written from a folder beside ``../shared/ikat`` (the data's
    folder linked there) with the checkout's ``configs``, prints the lines the page quotes after it, in order, but
    for the seconds it took: the shell lines in bash, ``export`` into the environment, ``ikatkit ... &`` (the
    simulator) as a process in the background, on a free port instead of the page's (its line read from its
    standard output), the other ikatkit commands in this process. 94 s on the 2-core machine (load about 1)."""
    import os
    import shlex
    import subprocess
    import sys

    from serving import wait_until_serving

    from ikatkit.cli import main
    from ikatkit.llm.server import free_port

    page = DOCS / "rehearsal-2026.md"
    assert [c.split()[1] for commands, _ in _command_outputs(page) for c in commands] == [
        "index", "simulate", "interactive", "interactive", "validate", "validate", "eval", "eval", "eval", "eval",
        "eval-responses", "eval-responses"]
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "ikat").symlink_to(ikat2023.parent)
    work = tmp_path / "main"
    work.mkdir()
    (work / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(work)
    port = str(free_port())

    def local(text: str) -> str:
        return text.replace("127.0.0.1:8626", f"127.0.0.1:{port}").replace("--port 8626", f"--port {port}")

    blocks = FENCE.findall(page.read_text(encoding="utf-8"))
    ran, servers = [], []
    try:
        for (kind, body), (next_kind, quoted) in zip(blocks, [*blocks[1:], ("", "")]):
            if kind != "bash":
                continue
            commands, printed = [], ""
            for step, line in _steps(body):
                if step == "sh":
                    subprocess.run(["bash", "-ec", line], check=True)
                elif step == "export":
                    for assignment in shlex.split(line)[1:]:
                        name, _, value = assignment.partition("=")
                        monkeypatch.setenv(name, os.path.expandvars(value))
                else:
                    commands.append(line)
                    args = shlex.split(os.path.expandvars(local(line)).removesuffix("&"))
                    if line.endswith("&"):
                        out, err = (tmp_path / f"background-{len(servers)}.{s}" for s in ("out", "err"))
                        with out.open("w") as stdout, err.open("w") as stderr:
                            servers.append(subprocess.Popen([sys.executable, "-m", "ikatkit.cli", *args[1:]],
                                                            stdout=stdout, stderr=stderr,
                                                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}))
                        wait_until_serving(servers[-1], f"http://127.0.0.1:{port}", 120, err.read_text)
                        printed += out.read_text()
                    else:
                        assert main(args[1:]) == 0, line
                        printed += capsys.readouterr().out
            if commands:
                assert next_kind == "text", f"no output quoted after {commands}"
                ran.append((commands, printed))
                assert SECONDS.sub("T s", printed).splitlines() == SECONDS.sub("T s", local(quoted)).splitlines(), \
                    commands
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
    assert [commands for commands, _ in ran] == [commands for commands, _ in _command_outputs(page)]

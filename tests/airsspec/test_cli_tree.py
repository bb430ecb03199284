"""The command tree: ``airsspec --help`` lists every command once under a heading; a command
with actions (``session``, ``learnings``, ``models``, ``token``, ``hooks``) gives each action
its own options and help, so an option of one action is a usage error on another (exit 2, one
``airsspec: error:`` line, the log untouched); earlier names (``query``, ``--tier``, ``gc``)
still run the same command."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from airsspec.cli import SECTIONS, build_parser
from tests.conftest import snapshot
from tests.support.cli import run_cli

GOOD = b'{"type": "user", "content": "hello"}\n'


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    assert run_cli("init", str(root), cwd=root).returncode == 0
    assert run_cli("append", "s", cwd=root, stdin=GOOD).returncode == 0
    return root


def _top(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_top_level_help_lists_every_listed_command_once_under_its_heading() -> None:
    parser = build_parser()
    text = parser.format_help()
    headings = [heading for heading, _ in SECTIONS]
    positions = [text.index(f"\n{heading}:\n") for heading in headings]
    assert positions == sorted(positions), "headings out of order"
    listed = [a.dest for a in _top(parser)._choices_actions]  # commands given a help line
    found = re.findall(r"^  (\S+)", text, re.M)
    assert sorted(n for n in found if not n.startswith("-")) == sorted(listed)
    for heading, names in (
        ("log", ["init", "append", "verify", "seal", "replay", "sessions", "import", "export"]),
        ("search", ["search", "sql", "report"]),
        ("memory across sessions", ["session", "learnings", "facts", "forget"]),
    ):
        start = text.index(f"\n{heading}:\n")
        block = text[start : text.index("\n\n", start + 2)]
        assert re.findall(r"^  (\S+)", block, re.M) == names
    assert "search (query)" in text
    assert "gc" not in found  # an earlier name runs, but is not listed


def test_an_action_help_shows_only_its_own_options() -> None:
    done = run_cli("learnings", "confirm", "--help", cwd=Path.cwd())
    assert done.returncode == 0
    text = done.stdout.decode()
    assert text.startswith("usage: airsspec learnings confirm")
    options = set(re.findall(r"(--[a-z-]+)", text))
    assert options == {"--by", "--help", "--json", "--reason"}, options


@pytest.mark.parametrize(
    "argv",
    [
        ["session", "start", "s2", "--status", "done"],  # --status goes with end
        ["session", "end", "s", "--user", "alice"],  # the owner goes with start
        ["session", "phase", "s"],  # phase needs the new phase
        ["session", "show", "s", "improve"],
        ["learnings", "confirm", "Lx", "--tier", "hot"],  # --tier goes with list
        ["learnings", "list", "Lx"],
        ["learnings", "add"],
        ["learnings", "nope"],
        ["models", "fetch", "--all"],
        ["token", "create"],  # --user is required
        ["token", "revoke"],
        ["rebuild", "--projection", "nope"],
    ],
    ids=" ".join,
)
def test_an_option_of_another_action_is_a_usage_error_and_changes_nothing(
    project: Path, argv: list[str]
) -> None:
    logs = project / ".airsspec" / "contexts"
    before = snapshot(logs)
    done = run_cli(*argv, cwd=project)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("airsspec: error: "), lines
    assert argv[0] in lines[0]  # names the command it was given to
    assert snapshot(logs) == before


def test_earlier_names_parse_to_the_same_command() -> None:
    parser = build_parser()
    query = parser.parse_args(["query", "x", "-k", "3"])
    search = parser.parse_args(["search", "x", "-k", "3"])
    assert query.func is search.func and (query.text, query.k) == (search.text, search.k)
    tier = parser.parse_args(["project", "--tier", "hot"])
    projection = parser.parse_args(["project", "--projection", "hot"])
    assert tier.projection == projection.projection == "hot"
    assert parser.parse_args(["gc"]).func is parser.parse_args(["learnings", "gc"]).func
    assert parser.parse_args(["learnings"]).func is parser.parse_args(["learnings", "list"]).func


def test_learnings_with_no_action_lists_with_the_list_options(project: Path) -> None:
    added = run_cli("learnings", "add", "always run the tests first", cwd=project)
    assert added.returncode == 0, added.stderr
    options = ["--all", "--json", "--as-of", "2100-01-01T00:00:00Z"]
    bare = run_cli("learnings", *options, cwd=project)
    listed = run_cli("learnings", "list", *options, cwd=project)
    assert bare.returncode == listed.returncode == 0, bare.stderr
    assert b"always run the tests first" in bare.stdout
    assert bare.stdout == listed.stdout

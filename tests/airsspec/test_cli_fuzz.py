"""A hypothesis fuzz of every command's arguments and input, run in-process through the CLI's
``main``: the exit code is 0, 1 or 2; no exception escapes (a user never sees a traceback); and
when the exit is not 0, every log is byte for byte as it was.

The arguments are drawn from the parser itself (each command's options and positionals), with
values from a pool of awkward ones (dates at the ends of the calendar, integers past 64 bits,
paths out of the workspace, control characters) and random text (without NUL, which no
argument can hold). Left out: ``watch`` and
``mcp`` (they serve until stopped) and ``models fetch`` (it runs pip against the network).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from airsspec.cli import build_parser, main
from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli
from tests.support.logs import use_extractive_summarizer

pytestmark = pytest.mark.slow

SKIPPED = {"watch", "mcp", "serve"}  # they run until stopped
VALUES = [
    "",
    "-",
    "alpha",
    "nosuch",
    "../outside",
    "/etc/passwd",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "2026-11-22",
    "18446744073709551616",
    "-1",
    "0",
    "3",
    "1e309",
    "nan",
    "a\tb",
    "\x1b[31m",
    "x" * 300,
    "30d",
    "tools",
    "claude-code",
    "parquet",
    "select count(*) from events",
    "x.jsonl",
    "hot",
    "all",
]
STDIN = [
    b"",
    b"garbage\n",
    b'{"type": "user", "content": "fuzzed"}\n',
    b'{"type": "user", "content": "x", "meta": {"n": 18446744073709551616}}\n',
    b'{"type": "user", "content": "x", "ts": "0001-01-01T00:00:00+05:00"}\n',
    b"[1, 2, 3]\n",
    b"[" * 100_000,
    b'{"query": "parser", "k": 3}\n',
    b'{"session_id": "alpha", "hook_event_name": "SessionStart"}',
]
# An argument can never hold a NUL byte (the OS passes argv as C strings).
value = st.sampled_from(VALUES) | st.text(st.characters(blacklist_characters="\x00"), max_size=12)


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if name not in SKIPPED}


COMMANDS = _commands()


def _arguments(draw: st.DrawFn, parser: argparse.ArgumentParser) -> list[str]:
    """Arguments for ``parser``: its options and positionals; for a group, an action (usually
    one it has) and then that action's own arguments."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:  # a positional: usually given, sometimes not
            if isinstance(action, argparse._SubParsersAction):
                name = draw(st.sampled_from(sorted(action.choices)) | value)
                if name == "fetch":  # models fetch runs pip against the network
                    name = "status"
                argv.append(name)
                if name in action.choices:
                    argv += _arguments(draw, action.choices[name])
                continue
            count = draw(st.integers(0, 2)) if action.nargs in ("*", "+", "?") else 1
            known = st.sampled_from(list(action.choices)) if action.choices else value
            argv += [draw(known) for _ in range(count if draw(st.integers(0, 9)) else 0)]
            continue
        if not draw(st.booleans()):
            continue
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            good = (
                st.sampled_from(list(action.choices))
                if action.choices
                else st.integers(-2, 2**70).map(str)
                if action.type in (int, float)
                else value
            )
            argv.append(draw(good | value))
    return argv


@st.composite
def invocation(draw: st.DrawFn) -> list[str]:
    name = draw(st.sampled_from(sorted(COMMANDS)))
    return [name, *_arguments(draw, COMMANDS[name])]


class _Stdin(io.TextIOWrapper):
    """Standard input with the bytes given (``.buffer`` too, as the CLI reads either)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root.parent / "tmp").mkdir(exist_ok=True)
    init_workspace(root)
    config = root / "airsspec.toml"
    use_extractive_summarizer(config)
    lines = "".join(
        json.dumps({"type": "user", "content": f"alpha step {i}: keep parser.py stable"}) + "\n"
        for i in range(20)
    )
    assert run_cli("append", "alpha", cwd=root, stdin=lines.encode()).returncode == 0
    return root


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=invocation(), stdin=st.sampled_from(STDIN))
# Found by fuzzing: a chart named with an extension matplotlib cannot write; a point in time or
# a folder no file name can hold (a lone surrogate); a budget past 64 bits, printed back in JSON.
@example(argv=["report", "sessions", "--plot", "x.jsonl"], stdin=b"")
@example(argv=["rebuild", "--as-of", "\ud800"], stdin=b"")
@example(argv=["rebuild", "--as-of", "1", "--out", "\ud800"], stdin=b"")
@example(argv=["context", "--json", "alpha", "--budget", "18446744073709551616"], stdin=b"")
@example(argv=["hot", "--json", "alpha", "--budget", "18446744073709551616"], stdin=b"")
def test_any_invocation_exits_0_1_or_2_and_a_failure_changes_no_log(
    project: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], stdin: bytes
) -> None:
    monkeypatch.chdir(project)
    # What a command makes in a temporary folder of its own (reextract's default output)
    # stays under the test's folder, not in the machine's.
    monkeypatch.setattr(tempfile, "tempdir", str(project.parent / "tmp"))
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    logs = project / ".airsspec" / "contexts"
    before = snapshot(logs)
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdin", _Stdin(stdin))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors, --help, --version
            code = exc.code if isinstance(exc.code, int) else 2
    event(f"exit {code}")
    assert code in (0, 1, 2), (argv, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
    if code != 0:
        assert snapshot(logs) == before, argv
    os.environ.pop("_ARGCOMPLETE", None)

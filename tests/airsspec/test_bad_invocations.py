"""A corpus of user mistakes, each run as a user would: every one exits 1 or 2 with a message
naming the problem, never a traceback, and leaves the log exactly as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli

GOOD = b'{"type": "user", "content": "hello"}\n'

# (arguments, standard input, environment); {ws} is the workspace, {tmp} the project folder
CORPUS: list[tuple[list[str], bytes | None, dict[str, str]]] = [
    ([], None, {}),
    (["nope"], None, {}),
    (["append"], GOOD, {}),
    (["append", "../escape"], GOOD, {}),
    (["append", "s"], b"", {}),
    (["append", "s"], b"not json\n", {}),
    (["append", "s"], b'{"type": "user", "content": "x", "ts": "0001-01-01T00:00:00+01:00"}', {}),
    (["append", "s"], b'{"type": "user", "content": "x", "meta": {"n": 18446744073709551616}}', {}),
    (["append", "s", "{tmp}/missing.jsonl"], None, {}),
    (["append", "S"], GOOD, {}),
    (["append", "s"], GOOD, {"AIRSSPEC_LOG_DURABILITY": "sometimes"}),
    (["-w", "{tmp}/typo", "sessions"], None, {}),
    (["-c", "{tmp}/missing.toml", "sessions"], None, {}),
    (["replay", "missing"], None, {}),
    (["replay", "s", "--until", "yesterday"], None, {}),
    (["replay", "s", "--from", "x"], None, {}),
    (["query"], None, {}),
    (["query", "x", "-k", "0"], None, {}),
    (["query", "x", "--since", "nope"], None, {}),
    (["query", "x", "--session", "../x"], None, {}),
    (["query", "--batch", "{tmp}/missing.jsonl"], None, {}),
    (["query", "--batch", "-"], b'{"query": "x", "k": "many"}\n', {}),
    (["sql", "DELETE FROM events"], None, {}),
    (["sql", "SELEC 1"], None, {}),
    (["sql", "select 1", "--parquet", "{tmp}/missing"], None, {}),
    (["sql", "select * from nope"], None, {}),
    (["rebuild", "--as-of", "tuesday", "--out", "{tmp}/past"], None, {}),
    (["rebuild", "--out", "{tmp}/past"], None, {}),
    (["rebuild", "--as-of", "3", "--out", "{ws}/inside"], None, {}),
    (["hot", "missing"], None, {}),
    (["context", "s", "--budget", "0"], None, {}),
    (["context", "bad/id", "--budget", "10"], None, {}),
    (["compact", "missing"], None, {}),
    (["library", "--show", "999"], None, {}),
    (["export", "claude-code", "missing"], None, {}),
    (["export", "parquet", "{ws}/contexts/agent/out"], None, {}),
    (["import", "claude-code", "{tmp}/missing"], None, {}),
    (["import", "nope", "{tmp}"], None, {}),
    (["verify", "--key", "{tmp}/key"], None, {}),
    (["verify", "--against", "{tmp}/missing-seal.json"], None, {}),
    (["seal", "--key", "{tmp}/missing-key"], None, {}),
    (["import", "openhands", "{tmp}/numbers.json"], None, {}),
    (["import", "locomo", "{tmp}/string-session.json"], None, {}),
    (["import", "locomo", "{tmp}/number-turns.json"], None, {}),
    (["report", "nope"], None, {}),
    (["models", "nope"], None, {}),
    (["hooks", "nope"], None, {}),
    (["completion", "powershell"], None, {}),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    init_workspace(root)
    assert run_cli("append", "s", cwd=root, stdin=GOOD * 3).returncode == 0
    (root / "numbers.json").write_text("[1, 2, 3]")
    conversation = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
    }
    for name, turns in (("string-session", "a string"), ("number-turns", [1, 2])):
        sample = {"sample_id": "x", "conversation": {**conversation, "session_1": turns}}
        (root / f"{name}.json").write_text(json.dumps([sample]))
    return root


@pytest.mark.parametrize(("args", "stdin", "env"), CORPUS, ids=lambda v: repr(v)[:60])
def test_a_mistake_is_named_never_a_traceback_and_the_log_is_untouched(
    project: Path, args: list[str], stdin: bytes | None, env: dict[str, str]
) -> None:
    ws = project / ".airsspec"
    argv = [a.format(tmp=project, ws=ws) for a in args]
    before = snapshot(ws / "contexts")
    result = run_cli(*argv, cwd=project, stdin=stdin, env=env)
    assert result.returncode in (1, 2), (argv, result.stdout, result.stderr)
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    lines = result.stderr.decode().strip().splitlines()
    assert lines, "no message"
    assert lines[0].startswith(("airsspec: error:", "<stdin>:", str(project))), lines
    assert snapshot(ws / "contexts") == before
    assert not (project / "typo").exists()


def test_append_with_standard_input_closed_is_a_clear_error(project: Path) -> None:
    before = snapshot(project / ".airsspec" / "contexts")
    result = subprocess.run(
        [sys.executable, "-m", "airsspec", "append", "s"],
        cwd=project,
        stdin=None,
        capture_output=True,
        preexec_fn=lambda: os.close(0),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(b"airsspec: error: standard input is closed")
    assert snapshot(project / ".airsspec" / "contexts") == before

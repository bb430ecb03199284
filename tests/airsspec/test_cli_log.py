"""The log commands as a user runs them: init, append, verify, replay, sessions; bad input
exits 2 and changes no byte."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.conftest import snapshot
from tests.support.cli import run_cli
from tests.support.logs import edit_config


@pytest.fixture
def project(tmp_path: Path) -> Path:
    result = run_cli("init", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path


EVENTS = b"""\
{"type": "user", "content": "Add rate limiting to the API", "ts": "2026-01-01T10:00:00Z"}
{"type": "thought", "content": "Check the middleware first", "ts": "2026-01-01T10:00:05Z"}

{"type": "action", "tool": "read_file", "params": {"path": "api/middleware.py"}, \
"ts": "2026-01-01T10:00:06Z"}
{"type": "observation", "result": "def middleware(): ...", "ts": "2026-01-01T10:00:07Z"}
"""


def test_init_writes_commented_config_and_folders(project: Path) -> None:
    config = (project / "airsspec.toml").read_text()
    assert '# durability = "always"' in config and config.count("#") > 10
    assert tomllib.loads(config) == {  # every default a comment: a later version's reaches it
        "workspace": {"path": ".airsspec"},
        **{name: {} for name in ("log", "memory", "compactor", "cold", "visual", "learnings")},
        "secrets": {"patterns": {}},
    }
    for sub in ("contexts/agent", "knowledge/library", "knowledge/vectors", "sources", "state"):
        assert (project / ".airsspec" / sub).is_dir()
    again = run_cli("init", str(project), cwd=project)
    assert again.returncode == 0 and b"kept existing" in again.stdout


def test_append_replay_verify_sessions(project: Path) -> None:
    result = run_cli("append", "spec-1", "-", cwd=project, stdin=EVENTS)
    assert result.returncode == 0, result.stderr
    assert b"appended 4 record(s) to spec-1 (seq 1-4)" in result.stdout

    replay = run_cli("replay", "spec-1", cwd=project).stdout.decode()
    assert "Add rate limiting" in replay and 'read_file({"path":"api/middleware.py"})' in replay

    exact = run_cli("replay", "spec-1", "--json", cwd=project).stdout
    assert exact == (project / ".airsspec/contexts/agent/spec-1.jsonl").read_bytes()

    until_seq = run_cli("replay", "spec-1", "--json", "--from", "2", "--until", "3", cwd=project)
    assert [json.loads(x)["seq"] for x in until_seq.stdout.splitlines()] == [2, 3]
    until_time = run_cli(
        "replay", "spec-1", "--json", "--until", "2026-01-01T10:00:05Z", cwd=project
    )
    assert [json.loads(x)["seq"] for x in until_time.stdout.splitlines()] == [1, 2]

    verify = run_cli("verify", cwd=project)
    assert verify.returncode == 0 and b"OK: 1 session(s), 4 record(s)" in verify.stdout

    sessions = json.loads(run_cli("sessions", "--json", cwd=project).stdout)
    assert sessions[0]["session"] == "spec-1" and sessions[0]["records"] == 4
    assert sessions[0]["first_ts"] == "2026-01-01T10:00:00.000000Z"
    assert sessions[0]["last_ts"] == "2026-01-01T10:00:07.000000Z"


def test_append_json_prints_the_records_as_stored(project: Path) -> None:
    added = run_cli("append", "spec-1", "--json", cwd=project, stdin=EVENTS)
    assert added.returncode == 0, added.stderr
    printed = json.loads(added.stdout)
    stored = run_cli("replay", "spec-1", "--json", cwd=project).stdout.splitlines()
    assert len(printed) == 4 and printed == [json.loads(line) for line in stored]
    assert "meta" not in printed[0]  # a field the record was stored without is not printed


def test_append_after_a_seq_lands_only_on_that_record(project: Path) -> None:
    """``--after SEQ``: appended only while the session's last record is SEQ; else one error
    line naming both seqs, exit 1, nothing appended."""
    assert run_cli("append", "s", "--after", "0", cwd=project, stdin=EVENTS).returncode == 0
    late = b'{"type": "user", "content": "decided on seq 3"}\n'
    before = snapshot(project)
    for stale in ("3", "0"):
        refused = run_cli("append", "s", "--after", stale, cwd=project, stdin=late)
        assert refused.returncode == 1, refused.stderr
        err = refused.stderr.decode()
        assert err.count("airsspec: error:") == 1 and f"after seq {stale}, but" in err
        assert "last record is seq 4" in err and "Traceback" not in err
    assert snapshot(project) == before
    refused = run_cli("append", "s", "--after", "-1", cwd=project, stdin=late)
    assert refused.returncode == 2 and "--after" in refused.stderr.decode()
    assert "0 or more" in refused.stderr.decode() and "'-1'" in refused.stderr.decode()
    assert run_cli("append", "s", "--after", "4", cwd=project, stdin=late).returncode == 0
    stored = run_cli("replay", "s", "--json", cwd=project).stdout.splitlines()
    assert json.loads(stored[-1])["content"] == "decided on seq 3"


BAD_INPUTS = {
    "invalid json": (b'{"type": "user", "content": "ok"}\n{"type": "user", "content": \n', ":7:"),
    "unknown field": (b'{"type": "user", "content": "x", "colour": 1}\n', "'colour'"),
    "unknown type": (b'{"type": "telepathy", "content": "x"}\n', "unknown event type"),
    "missing field": (b'{"type": "action", "params": {}}\n', "'tool'"),
    "bad time": (b'{"type": "user", "content": "x", "ts": "soon"}\n', "'ts'"),
    "not an object": (b"[1, 2]\n", "JSON object"),
    "NaN": (b'{"type": "user", "content": "x", "meta": {"v": NaN}}\n', "invalid JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_invalid_input_exits_2_and_changes_nothing(project: Path, case: str) -> None:
    run_cli("append", "s", "-", cwd=project, stdin=EVENTS)
    data, expected = BAD_INPUTS[case]
    source = project / "events.jsonl"
    source.write_bytes(EVENTS + data)
    before = snapshot(project)
    result = run_cli("append", "s", str(source), cwd=project)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert f"{source}:" in err and expected in err and "nothing appended" in err
    assert snapshot(project) == before


@pytest.mark.parametrize("session", ["../outside", "a/b", "..", "con"])
def test_path_escaping_session_exits_2(tmp_path: Path, session: str) -> None:
    project = tmp_path / "project"  # its parent holds nothing but it: other tests' files vary
    assert run_cli("init", str(project), cwd=tmp_path).returncode == 0
    before = snapshot(tmp_path)
    result = run_cli("append", session, "-", cwd=project, stdin=EVENTS)
    assert result.returncode == 2 and b"invalid session id" in result.stderr
    assert snapshot(tmp_path) == before


def test_verify_reports_tampering_with_location(project: Path) -> None:
    run_cli("append", "s", "-", cwd=project, stdin=EVENTS)
    path = project / ".airsspec/contexts/agent/s.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"middleware", b"middlewore")
    path.write_bytes(b"".join(lines))
    result = run_cli("verify", cwd=project)
    assert result.returncode == 1
    offset = len(lines[0]) + len(lines[1])
    assert f"FAIL s: seq 3, byte offset {offset}: hash mismatch".encode() in result.stdout


def test_bad_config_value_names_key_and_allowed_values(project: Path) -> None:
    config = project / "airsspec.toml"
    edit_config(config, ('durability = "always"', 'durability = "maybe"'))
    result = run_cli("sessions", cwd=project)
    assert result.returncode == 2
    assert b"[log] durability" in result.stderr and b"'always', 'batch' or 'off'" in result.stderr
    edit_config(config, ('durability = "maybe"', 'durability = "batch"'))
    env_result = run_cli("sessions", cwd=project, env={"AIRSSPEC_MEMORY_CHUNK_SIZE": "zero"})
    assert env_result.returncode == 2
    assert b"environment AIRSSPEC_MEMORY_CHUNK_SIZE: a whole number" in env_result.stderr
    env_result = run_cli("sessions", cwd=project, env={"AIRSSPEC_MEMORY_CHUNK_SIZE": "-4"})
    assert env_result.returncode == 2  # a whole number, out of range: the key and its bound
    assert b"environment: [memory] chunk_size" in env_result.stderr


def test_environment_overrides_config(project: Path) -> None:
    result = run_cli("sessions", cwd=project, env={"AIRSSPEC_LOG_DURABILITY": "sometimes"})
    assert result.returncode == 2 and b"environment" in result.stderr

"""The hooks against hostile or careless input: a settings file of an odd shape is refused with
one error line and left as it was, a hook given a payload it cannot use says so in one line
(never a traceback: it must not block Claude Code), and the user's own hooks survive
``install`` and ``uninstall`` even when they sit in the group airsspec installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec.hooks import entries, handle, settings_file, workspace_for
from airsspec.memory import Memory
from eventlog.errors import HookInputError
from tests.conftest import init_workspace
from tests.support.cli import run_cli

THEIR_HOOK = {"type": "command", "command": "prettier --write ."}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    (tmp_path / ".claude").mkdir()
    return tmp_path


def test_a_group_whose_hooks_is_not_a_list_is_refused_with_one_line(project: Path) -> None:
    settings = project / ".claude" / "settings.local.json"
    for odd in (
        '{"hooks": {"Stop": [{"hooks": 5}]}}\n',
        '{"hooks": {"Stop": [{"hooks": null}]}}\n',
    ):
        settings.write_text(odd)
        for action in ("install", "uninstall"):
            result = run_cli("hooks", action, "--project", str(project), cwd=project)
            err = result.stderr.decode()
            assert result.returncode != 0
            assert err.startswith("airsspec: error:") and err.count("\n") == 1, err
            assert "hooks.Stop" in err
            assert settings.read_text() == odd


def test_uninstall_keeps_a_hook_the_user_added_to_airsspecs_group(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"model": "opus"}\n')
    assert settings_file.install(settings, entries("local"))
    data = json.loads(settings.read_text())
    # what Claude Code's /hooks menu does when the user adds a hook to matcher "*"
    data["hooks"]["PostToolUse"][0]["hooks"].append(THEIR_HOOK)
    settings.write_text(json.dumps(data, indent=2))
    removed, outcome = settings_file.uninstall(settings)
    assert (removed, outcome) == (7, "edited")
    assert json.loads(settings.read_text()) == {
        "model": "opus",
        "hooks": {"PostToolUse": [{"matcher": "*", "hooks": [THEIR_HOOK]}]},
    }


def test_install_again_keeps_a_hook_the_user_added_to_airsspecs_group(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    assert settings_file.install(settings, entries("local"))
    data = json.loads(settings.read_text())
    data["hooks"]["PostToolUse"][0]["hooks"].append(THEIR_HOOK)
    settings.write_text(json.dumps(data, indent=2))
    assert settings_file.install(settings, entries("local", after=["--budget", "500"]))
    groups = json.loads(settings.read_text())["hooks"]["PostToolUse"]
    assert any(THEIR_HOOK in g["hooks"] for g in groups)
    assert sum("--budget 500" in json.dumps(g) for g in groups) == 1
    assert sum("airsspec-hook" in json.dumps(g) for g in groups) == 1


@pytest.mark.parametrize("key", ["transcript_path", "cwd"])
def test_a_path_naming_an_unknown_users_home_is_one_error_line(project: Path, key: str) -> None:
    payload = {"session_id": "abc", "transcript_path": str(project / "t" / "abc.jsonl")}
    payload[key] = "~no-such-user-here/abc.jsonl"
    result = run_cli("hook", "Stop", cwd=project, stdin=json.dumps(payload).encode())
    err = result.stderr.decode()
    assert result.returncode == 1
    assert err.startswith("airsspec: error:") and err.count("\n") == 1, err


def test_handle_and_workspace_for_wrap_an_unknown_home(tmp_path: Path) -> None:
    with pytest.raises(HookInputError):
        workspace_for({"cwd": "~no-such-user-here"}, tmp_path)
    with Memory.open(tmp_path / "p", create=True) as memory:
        payload = {"session_id": "abc", "transcript_path": "~no-such-user-here/abc.jsonl"}
        with pytest.raises(HookInputError):
            handle(memory, "Stop", payload)


def test_a_job_whose_sessions_is_a_string_is_refused(tmp_path: Path) -> None:
    from airsspec.hooks import Job

    with pytest.raises(HookInputError):
        Job.from_json({"sessions": "abc"})  # not the sessions a, b and c


def _one_prompt(tmp_path: Path) -> dict:
    """The payload of session abc, whose transcript holds one prompt."""
    transcript = tmp_path / "t" / "abc.jsonl"
    transcript.parent.mkdir()
    line = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "abc",
        "timestamp": "2026-11-01T10:00:01.000Z",
        "message": {"role": "user", "content": "Add a health check"},
    }
    transcript.write_text(json.dumps(line) + "\n")
    return {"session_id": "abc", "transcript_path": str(transcript)}


def test_a_session_end_job_run_twice_ends_the_session_once(tmp_path: Path) -> None:
    from airsspec.hooks import Job, run_job

    payload = _one_prompt(tmp_path)
    with Memory.open(tmp_path / "p", create=True) as memory:
        handle(memory, "UserPromptSubmit", {**payload, "prompt": "Add a health check"})
        for _ in range(2):  # installed in two scopes, or the job run again by hand
            run_job(memory, Job(("abc",), "logout"))
        ends = [r for r in memory.replay("abc") if r.type == "session_ended"]
        assert len(ends) == 1
        handle(memory, "SessionStart", {**payload, "source": "resume"})
        run_job(memory, Job(("abc",), "logout"))  # a resumed session ends again
        assert sum(r.type == "session_ended" for r in memory.replay("abc")) == 2


def test_a_crlf_file_gets_crlf_entries_and_uninstall_gives_its_bytes_back(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    original = b'{\r\n  "model": "opus",\r\n  "hooks": {\r\n    "Stop": []\r\n  }\r\n}\r\n'
    settings.write_bytes(original)
    assert settings_file.install(settings, entries("local"))
    installed = settings.read_bytes()
    assert installed.count(b"\n") == installed.count(b"\r\n") > 10  # no line in another style
    assert json.loads(installed)["model"] == "opus"
    settings_file.uninstall(settings)
    assert settings.read_bytes() == original


@pytest.mark.parametrize("reason", ["\x1b]0;owned\x07", "x" * 201, 5, None])
def test_a_session_end_reason_that_is_not_a_short_printable_word_is_other(
    tmp_path: Path, reason: object
) -> None:
    payload = {**_one_prompt(tmp_path), "reason": reason}
    jobs: list = []
    with Memory.open(tmp_path / "p", create=True) as memory:
        handle(memory, "SessionEnd", payload, defer=jobs.append)
    assert [job.end_status for job in jobs] == ["other"]


def test_session_end_jobs_running_at_once_end_the_session_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import children

    payload = _one_prompt(tmp_path)
    workspace = tmp_path / "p"
    with Memory.open(workspace, create=True) as memory:
        handle(memory, "UserPromptSubmit", {**payload, "prompt": "Add a health check"})
    job = json.dumps({"sessions": ["abc"], "end_status": "logout"})
    command = [sys.executable, "-m", "airsspec", "-w", str(workspace / ".airsspec")]
    jobs = [
        subprocess.Popen([*command, "hook", "run-job", "--job", job], stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    for proc in jobs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
        assert not children(proc.pid)
    with Memory.open(workspace) as memory:
        assert sum(r.type == "session_ended" for r in memory.replay("abc")) == 1


def test_session_show_prints_stored_escapes_as_text(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "p", create=True) as memory:
        memory.sessions.start("s1", task="retitle \x1b]0;owned\x07 the terminal")
    shown = run_cli("-w", str(tmp_path / "p" / ".airsspec"), "session", "show", "s1", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert b"\x1b" not in shown.stdout and b"\\x1b]0;owned\\x07" in shown.stdout


@pytest.mark.parametrize("payload", [b"", b"{}", b'{"session_id": 5}', b'{"session_id": ""}'])
def test_a_payload_naming_no_session_says_so_in_one_line(project: Path, payload: bytes) -> None:
    """A payload with neither a transcript nor a session id (an empty one, a number) is one
    line naming what is missing (it said 'invalid session id None')."""
    for event in ("SessionStart", "Stop"):
        result = run_cli("hook", event, cwd=project, stdin=payload)
        err = result.stderr.decode()
        assert result.returncode == 1 and err.count("\n") == 1, err
        assert err.startswith("airsspec: error: hook input names no session"), err


@pytest.mark.parametrize("key", ["cwd", "transcript_path"])
def test_a_path_too_long_for_the_system_is_one_error_line(project: Path, key: str) -> None:
    """A folder name longer than the system takes (ENAMETOOLONG) is one line, as every other
    path the hook cannot use (the walk up to airsspec.toml raised it as a traceback)."""
    payload = {"session_id": "abc", "cwd": str(project)}
    payload[key] = str(project / ("a" * 300) / "abc.jsonl")
    result = run_cli("hook", "Stop", cwd=project, stdin=json.dumps(payload).encode())
    err = result.stderr.decode()
    assert result.returncode == 1
    assert err.startswith("airsspec: error:") and err.count("\n") == 1, err


@pytest.mark.parametrize("key", ["transcript_path", "agent_transcript_path"])
def test_handle_wraps_a_transcript_path_the_system_cannot_look_at(tmp_path: Path, key: str) -> None:
    """As the server's hook route calls it: a path too long is a bad request (400) naming
    the field, not an OSError (answered 500)."""
    payload = {"session_id": "abc", "transcript_path": str(tmp_path / "abc.jsonl")}
    payload[key] = str(tmp_path / ("a" * 300) / "abc.jsonl")
    with (
        Memory.open(tmp_path / "p", create=True) as memory,
        pytest.raises(HookInputError, match=key),
    ):
        handle(memory, "Stop", payload)

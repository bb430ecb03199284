"""Claude Code hooks: install merges into settings.json without clobbering anything and twice
adds nothing; uninstall removes exactly ours; the installed commands, run as Claude Code runs
them (a shell, JSON on stdin), import a transcript that is still being written and print the
memory at session start."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli

THEIRS = {
    "model": "opus",
    "hooks": {
        "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
    },
}


def _line(uuid: str, kind: str, text: str, second: int) -> str:
    message = {
        "role": kind,
        "content": text if kind == "user" else [{"type": "text", "text": text}],
    }
    record = {
        "type": kind,
        "uuid": uuid,
        "sessionId": "abc",
        "timestamp": f"2026-11-01T10:00:{second:02d}.000Z",
        "message": message,
    }
    return json.dumps(record) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(THEIRS))
    return tmp_path


def _settings(project: Path) -> dict:
    return json.loads((project / ".claude" / "settings.json").read_text())


def test_install_keeps_other_hooks_and_uninstall_removes_only_ours(project: Path) -> None:
    for _ in range(2):  # installing twice adds nothing
        result = run_cli("hooks", "install", "--project", str(project), cwd=project)
        assert result.returncode == 0, result.stderr
    settings = _settings(project)
    assert settings["model"] == "opus"
    assert settings["hooks"]["Notification"] == THEIRS["hooks"]["Notification"]
    post = settings["hooks"]["PostToolUse"]
    assert post[0] == THEIRS["hooks"]["PostToolUse"][0] and len(post) == 2
    for event in ("SessionStart", "PostToolUse", "Stop", "PreCompact"):
        ours = [e for e in settings["hooks"][event] if "airsspec-hook" in json.dumps(e)]
        assert len(ours) == 1, event
    removed = run_cli("hooks", "uninstall", "--project", str(project), "--json", cwd=project)
    assert json.loads(removed.stdout)["removed"] == 4
    assert _settings(project) == THEIRS


def _run_hook(project: Path, event: str, payload: dict) -> subprocess.CompletedProcess[str]:
    """Run the installed command for ``event`` the way Claude Code does."""
    entry = next(e for e in _settings(project)["hooks"][event] if "airsspec-hook" in json.dumps(e))
    return subprocess.run(
        entry["hooks"][0]["command"],
        shell=True,
        cwd=project,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_installed_hooks_follow_a_live_transcript_and_feed_the_next_session(
    project: Path,
) -> None:
    assert run_cli("hooks", "install", "--project", str(project), cwd=project).returncode == 0
    transcript = project / "transcripts" / "abc.jsonl"
    transcript.parent.mkdir()
    first = _line("u1", "user", "Please add rate limiting to the upload API", 1)
    second = _line("a1", "assistant", "I will add a token bucket in middleware/upload.py", 2)
    transcript.write_text(first + second[:40])  # the second line is still being written
    payload = {"session_id": "abc", "transcript_path": str(transcript), "cwd": str(project)}

    done = _run_hook(project, "PostToolUse", {**payload, "hook_event_name": "PostToolUse"})
    assert done.returncode == 0, done.stderr
    log = project / ".airsspec" / "contexts" / "agent" / "abc.jsonl"
    assert len(log.read_text().splitlines()) == 1  # the unfinished line waits

    transcript.write_text(first + second)
    assert _run_hook(project, "Stop", {**payload, "hook_event_name": "Stop"}).returncode == 0
    assert len(log.read_text().splitlines()) == 2
    exported = run_cli("export", "claude-code", "abc", cwd=project)
    assert exported.stdout == transcript.read_bytes()  # nothing lost, nothing changed

    resumed = _run_hook(project, "SessionStart", {**payload, "source": "resume"})
    assert resumed.returncode == 0, resumed.stderr
    assert "token bucket" in resumed.stdout and "Memory of this session" in resumed.stdout

    fresh = {"session_id": "def", "transcript_path": str(project / "transcripts" / "def.jsonl")}
    tomorrow = _run_hook(project, "SessionStart", {**fresh, "source": "startup"})
    assert tomorrow.returncode == 0, tomorrow.stderr
    assert "previous session abc" in tomorrow.stdout and "rate limiting" in tomorrow.stdout


def test_a_broken_hook_input_never_blocks_claude_code(project: Path) -> None:
    assert run_cli("hooks", "install", "--project", str(project), cwd=project).returncode == 0
    entry = next(e for e in _settings(project)["hooks"]["Stop"] if "airsspec" in json.dumps(e))
    for stdin in ("not json", "[1, 2]", "{}"):
        done = subprocess.run(
            entry["hooks"][0]["command"],
            shell=True,
            cwd=project,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1  # reported, never 2 (which would block Claude Code)
        assert done.stderr.startswith("airsspec: error:") and "Traceback" not in done.stderr


def test_hook_input_nested_too_deep_is_a_clear_error(tmp_path: Path) -> None:
    """Found by the CLI fuzz: 100k-deep JSON on standard input was a RecursionError."""
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    result = run_cli("hook", "session-start", cwd=tmp_path, stdin=b"[" * 100_000)
    assert result.returncode == 1, result.stderr  # as for any other input that is not JSON
    assert b"Traceback" not in result.stderr and b"airsspec: error:" in result.stderr

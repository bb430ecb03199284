"""The Claude Code integration end to end, with no daemon: a real Claude Code transcript grows
line by line while the installed hook commands run as Claude Code runs them (a shell, the
documented payloads on stdin); a rule the user states in one session, and the tasks it left
open, are in the next session's SessionStart context, within its token budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SHARED_DATA, init_workspace, wait_for
from tests.support.cli import run_cli

SOURCE = SHARED_DATA / "claude-code" / "tool_heavy.jsonl"
RULE = "Always run ruff before committing"
OPEN_TASK = "Add retry with backoff to the upload client"
DONE_TASK = "Reproduce the scroll bug in xterm.js"
BUDGET = 2000


def _settings(project: Path) -> dict[str, Any]:
    return json.loads((project / ".claude" / "settings.local.json").read_text())


def run_hook(project: Path, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess:
    """Run the installed command for ``event`` the way Claude Code does."""
    groups = _settings(project)["hooks"][event]
    (entry,) = [g for g in groups if "airsspec-hook" in json.dumps(g)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        entry["hooks"][0]["command"],
        shell=True,
        cwd=project,
        input=json.dumps({**payload, "hook_event_name": event}),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{event}: {done.stderr}"
    return done


def jobs_running(root: Path) -> list[int]:
    """Detached hook jobs still running on the workspace of the project at ``root``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run-job" in argv and any(str(root).encode() in a for a in argv):
            found.append(int(proc.name))
    return found


def _line(template: dict[str, Any], uuid: str, message: dict[str, Any]) -> str:
    record = {**template, "uuid": uuid, "parentUuid": template.get("uuid"), "message": message}
    record["type"] = message["role"]
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"


def _closing_turn(last: dict[str, Any]) -> list[tuple[str, str]]:
    """The user's rule and a todo list, in the transcript's shape: (line, hook after it)."""
    todos = [
        {"content": DONE_TASK, "status": "completed", "activeForm": "Reproducing"},
        {"content": OPEN_TASK, "status": "pending", "activeForm": "Adding retry"},
    ]
    use = {"type": "tool_use", "id": "toolu_rule01", "name": "TodoWrite", "input": {"todos": todos}}
    result = {"type": "tool_result", "tool_use_id": "toolu_rule01", "content": "Todos updated"}
    return [
        (_line(last, "rule-1", {"role": "user", "content": RULE}), "UserPromptSubmit"),
        (_line(last, "rule-2", {"role": "assistant", "content": [use]}), ""),
        (_line(last, "rule-3", {"role": "user", "content": [result]}), "PostToolUse"),
        (
            _line(
                last,
                "rule-4",
                {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
            ),
            "Stop",
        ),
    ]


def _hook_after(obj: dict[str, Any]) -> str:
    """Which hook Claude Code runs around this transcript line (UserPromptSubmit: before)."""
    content = (obj.get("message") or {}).get("content")
    if obj.get("type") == "user" and isinstance(content, str) and not obj.get("isMeta"):
        return "UserPromptSubmit"
    is_list = isinstance(content, list) and content
    if obj.get("type") == "user" and is_list and content[0].get("type") == "tool_result":
        return "PostToolUse"
    return ""


@pytest.mark.slow
@pytest.mark.skipif(not SOURCE.is_file(), reason=f"needs the real transcript {SOURCE}")
def test_a_rule_stated_in_one_session_reaches_the_next_session_start(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    init_workspace(project)
    installed = run_cli("hooks", "install", "--project", str(project), cwd=project)
    assert installed.returncode == 0, installed.stderr
    lines = SOURCE.read_text(encoding="utf-8").splitlines(keepends=True)
    session = json.loads(lines[3])["sessionId"]
    transcript = tmp_path / "claude" / "projects" / "p" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    payload = {"session_id": session, "transcript_path": str(transcript), "cwd": str(project)}

    start = run_hook(project, "SessionStart", {**payload, "source": "startup"})
    assert "hookSpecificOutput" not in start.stdout  # an empty memory says nothing
    steps = [(line, _hook_after(json.loads(line))) for line in lines]
    steps += _closing_turn(json.loads(lines[-1]))
    with transcript.open("a", encoding="utf-8") as out:
        for line, hook in steps:
            if hook == "UserPromptSubmit":  # Claude Code runs it before writing the prompt
                text = json.loads(line)["message"]["content"]
                run_hook(project, hook, {**payload, "prompt": text})
            out.write(line)
            out.flush()
            if hook in ("PostToolUse", "Stop"):
                run_hook(project, hook, {**payload, "tool_name": "Bash"})
    run_hook(project, "Stop", {**payload, "stop_hook_active": False})
    ended = run_hook(project, "SessionEnd", {**payload, "reason": "prompt_input_exit"})
    assert ended.stdout == ""
    root = project / ".airsspec"
    log = root / "contexts" / "agent" / f"{session}.jsonl"
    assert wait_for(lambda: not jobs_running(project) and '"session_ended"' in log.read_text(), 120)
    assert not jobs_running(project)  # the detached job finished; nothing is left running
    exported = run_cli("export", "claude-code", session, cwd=project)
    assert exported.stdout == transcript.read_bytes()  # every line captured, none changed

    following = {
        "session_id": "next-session",
        "transcript_path": str(transcript.with_name("next-session.jsonl")),
        "cwd": str(project / "lib"),  # a subfolder of the project: the same workspace
    }
    (project / "lib").mkdir()
    answer = run_hook(project, "SessionStart", {**following, "source": "startup"})
    context = json.loads(answer.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    text = context["additionalContext"]
    assert RULE in text and OPEN_TASK in text, text
    # a finished task is never briefed as open (the summary may quote the tool call that
    # finished it, as where the work stopped)
    briefed_open = text.split("## Open tasks", 1)[1].split("\n## ", 1)[0]
    summary_open = text.split("## Goal and open tasks", 1)[1].split("\n## ", 1)[0]
    assert OPEN_TASK in briefed_open and DONE_TASK not in briefed_open + summary_open, text
    assert '"tool_use"' not in text and "toolu_" not in text  # no raw messages
    sys.path.insert(0, str(REPO))
    from airsspec.memory import Memory

    with Memory.open(project) as memory:
        tokens = memory.workspace.token_counter().count(text)
    print(f"SessionStart context: {tokens} tokens, {len(text.encode())} bytes\n{text}")
    assert tokens <= BUDGET

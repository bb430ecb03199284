"""Claude Code hooks, event by event: ``handle`` captures transcripts (subagents too), starts and
ends sessions (the slow part handed to ``defer``), and answers SessionStart with the documented
JSON built from the memory, never raw messages, within its budget; the installed commands, run
as Claude Code runs them, never block it and leave nothing running."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airsspec.hooks import Job, handle, run_job
from airsspec.memory import Memory
from tests.airsspec.test_hooks_e2e import jobs_running
from tests.conftest import SHARED_DATA, init_workspace, wait_for
from tests.support.cli import run_cli

SHORT = SHARED_DATA / "claude-code" / "short.jsonl"
RULE = "Always run ruff before committing"


def _line(uuid: str, kind: str, content: Any, second: int) -> str:
    record = {
        "type": kind,
        "uuid": uuid,
        "sessionId": "abc",
        "timestamp": f"2026-11-01T10:00:{second:02d}.000Z",
        "message": {"role": kind, "content": content},
    }
    return json.dumps(record) + "\n"


def _assistant(uuid: str, text: str, second: int) -> str:
    return _line(uuid, "assistant", [{"type": "text", "text": text}], second)


@pytest.fixture
def memory(tmp_path: Path):
    with Memory.open(tmp_path / "project", create=True) as opened:
        yield opened


def _payload(transcript: Path, **extra: Any) -> dict[str, Any]:
    return {"session_id": transcript.stem, "transcript_path": str(transcript), **extra}


def _said(memory: Memory, transcript: Path, lines: list[str]) -> dict[str, Any]:
    """A session in which ``lines`` were said, captured and ended through the hooks."""
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text("".join(lines))
    payload = _payload(transcript)
    first = json.loads(lines[0])["message"]["content"]
    handle(memory, "UserPromptSubmit", {**payload, "prompt": first})
    handle(memory, "Stop", payload)
    handle(memory, "SessionEnd", {**payload, "reason": "logout"})  # no defer: runs inline
    return payload


def test_session_start_answers_the_documented_json_and_never_raw_messages(
    memory: Memory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        _line("u1", "user", "Add rate limiting to the upload API", 1),
        _assistant("a1", "I will add a token bucket in middleware/upload.py", 2),
        _line("u2", "user", RULE, 3),
    ]
    _said(memory, tmp_path / "t" / "abc.jsonl", lines)
    new = tmp_path / "t" / "def.jsonl"
    answer = handle(memory, "SessionStart", {**_payload(new), "source": "startup"})
    assert answer is not None and set(answer) == {"hookSpecificOutput"}
    output = answer["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    text = output["additionalContext"]
    assert RULE in text  # the learning
    assert "abc (" in text and "ended: logout" in text and "Add rate limiting" in text
    assert "token bucket" not in text  # a message, not memory
    assert capsys.readouterr() == ("", "")  # handle answers; it never prints (a server calls it)


def test_after_claude_compacts_the_session_start_leaves_out_what_it_summarised(
    memory: Memory, tmp_path: Path
) -> None:
    transcript = tmp_path / "t" / "abc.jsonl"
    lines = [
        _line("u1", "user", f"Add rate limiting to the upload API. {RULE}", 1),
        _assistant("a1", "I will add a token bucket in middleware/upload.py", 2),
    ]
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(lines))
    handle(memory, "UserPromptSubmit", {**_payload(transcript), "prompt": "Add rate limiting"})
    memory.learnings.extract(transcript.stem, force=True)
    for source in ("compact", "resume"):
        answer = handle(memory, "SessionStart", {**_payload(transcript), "source": source})
        assert answer is not None
        text = answer["hookSpecificOutput"]["additionalContext"]
        assert "ruff" in text  # what was learned survives Claude's own compaction
        assert "token bucket" not in text  # Claude holds (or just summarised) the messages


def test_session_start_never_exceeds_its_budget(memory: Memory, tmp_path: Path) -> None:
    for n in range(5):
        words = " ".join(f"topic{n}-{k}" for k in range(120))
        lines = [_line("u1", "user", f"{words}", 1), _line("u2", "user", f"Always {words}", 2)]
        _said(memory, tmp_path / "t" / f"s{n}.jsonl", lines)
    counter = memory.workspace.token_counter()
    for budget in (1, 20, 60, 200, 600):
        answer = handle(memory, "SessionStart", {**_payload(tmp_path / "new.jsonl")}, budget=budget)
        text = answer["hookSpecificOutput"]["additionalContext"] if answer else ""
        assert counter.count(text) <= budget


def test_subagent_transcripts_are_captured_as_their_own_sessions(
    memory: Memory, tmp_path: Path
) -> None:
    transcript = tmp_path / "t" / "abc.jsonl"
    agent = tmp_path / "t" / "abc" / "subagents" / "agent-a1.jsonl"
    agent.parent.mkdir(parents=True)
    transcript.write_text(_line("u1", "user", "Research rate limiters", 1))
    agent.write_text(_line("s1", "user", "Find token bucket libraries", 1))
    payload = {**_payload(transcript), "agent_id": "a1", "agent_transcript_path": str(agent)}
    handle(memory, "SubagentStop", {**payload, "stop_hook_active": False})
    assert [r.content for r in memory.replay("abc.agent-a1")] == ["Find token bucket libraries"]
    assert [r.content for r in memory.replay("abc")] == ["Research rate limiters"]


def test_the_first_prompt_starts_the_session_with_its_task(memory: Memory, tmp_path: Path) -> None:
    transcript = tmp_path / "t" / "abc.jsonl"  # not written yet: the prompt comes first
    prompt = "Fix the flaky upload test\nIt fails one run in ten."
    assert handle(memory, "UserPromptSubmit", {**_payload(transcript), "prompt": prompt}) is None
    handle(memory, "UserPromptSubmit", {**_payload(transcript), "prompt": "and the lint"})
    info = memory.sessions.info("abc")
    assert info["task"] == "Fix the flaky upload test" and info["status"] == "active"


def test_session_end_hands_its_slow_work_to_defer(memory: Memory, tmp_path: Path) -> None:
    transcript = tmp_path / "t" / "abc.jsonl"
    agent = tmp_path / "t" / "abc" / "subagents" / "agent-a1.jsonl"
    agent.parent.mkdir(parents=True)
    transcript.write_text(_line("u1", "user", RULE, 1))
    agent.write_text(_line("s1", "user", "Find token bucket libraries", 1))
    jobs: list[Job] = []
    payload = {**_payload(transcript), "reason": "clear"}
    assert handle(memory, "SessionEnd", payload, defer=jobs.append) is None
    assert jobs == [Job(("abc", "abc.agent-a1"), "clear")]
    assert memory.sessions.info("abc").get("ended") is None  # nothing slow ran in the hook
    assert Job.from_json(json.loads(json.dumps(jobs[0].to_json()))) == jobs[0]
    run_job(memory, jobs[0])
    assert memory.sessions.info("abc")["status"] == "clear"
    assert any(a.text == RULE for a in memory.learnings.list().learnings)
    handle(memory, "SessionStart", {**_payload(transcript), "source": "resume"})
    assert memory.sessions.info("abc")["status"] == "active"  # resumed: open again
    assert handle(memory, "PreCompact", _payload(transcript), defer=jobs.append) is None
    assert jobs[1:] == [Job(("abc", "abc.agent-a1"), None)]  # policies only, nothing ended


def test_recalled_context_for_a_prompt_stays_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path / "project", create=True) as memory:
        lines = [
            _line("u1", "user", "How do we sign webhooks?", 1),
            _assistant("a1", "Webhooks are signed with HMAC-SHA256 over the raw body", 2),
        ]
        _said(memory, tmp_path / "t" / "abc.jsonl", lines)
        memory.project(("cold",))
        payload = {**_payload(tmp_path / "t" / "def.jsonl"), "prompt": "webhook HMAC signing"}
        answer = handle(memory, "UserPromptSubmit", payload, recall_budget=80)
        assert answer is not None
        text = answer["hookSpecificOutput"]["additionalContext"]
        assert answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
        assert "HMAC" in text and memory.workspace.token_counter().count(text) <= 80
        assert handle(memory, "UserPromptSubmit", payload) is None  # off by default


# ---------------------------------------------------------------------- the installed commands


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    assert run_cli("hooks", "install", "--project", str(tmp_path), cwd=tmp_path).returncode == 0
    return tmp_path


def _command(project: Path, event: str) -> str:
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    (group,) = [g for g in settings["hooks"][event] if "airsspec-hook" in json.dumps(g)]
    return group["hooks"][0]["command"]


def _run(project: Path, event: str, stdin: str, cwd: Path | None = None):
    return subprocess.run(
        _command(project, event),
        shell=True,
        cwd=cwd or project,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_broken_hook_input_never_blocks_claude_code(project: Path) -> None:
    for stdin in ("not json", "[1, 2]", json.dumps({"cwd": str(project)})):
        done = _run(project, "Stop", stdin)
        assert done.returncode == 1  # reported, never 2 (which would block Claude Code)
        assert done.stderr.startswith("airsspec: error:") and "Traceback" not in done.stderr


def test_hook_input_nested_too_deep_is_a_clear_error(tmp_path: Path) -> None:
    """Found by the CLI fuzz: 100k-deep JSON on standard input was a RecursionError."""
    init_workspace(tmp_path)
    result = run_cli("hook", "SessionStart", cwd=tmp_path, stdin=b"[" * 100_000)
    assert result.returncode == 1, result.stderr  # as for any other input that is not JSON
    assert b"Traceback" not in result.stderr and b"airsspec: error:" in result.stderr


def test_a_hook_in_a_project_without_airsspec_does_nothing(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path.parent / f"{tmp_path.name}-other"
    elsewhere.mkdir()
    transcript = elsewhere / "abc.jsonl"
    transcript.write_text(_line("u1", "user", "hello", 1))
    payload = {**_payload(transcript), "cwd": str(elsewhere), "source": "startup"}
    for event in ("SessionStart", "Stop", "SessionEnd"):
        done = _run(project, event, json.dumps(payload), cwd=elsewhere)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["abc.jsonl"]
    shutil.rmtree(elsewhere)


def test_session_end_returns_at_once_and_its_detached_job_finishes(project: Path) -> None:
    transcript = project / "t" / "abc.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(_line("u1", "user", RULE, 1))
    payload = {**_payload(transcript), "cwd": str(project), "reason": "prompt_input_exit"}
    done = _run(project, "SessionEnd", json.dumps(payload))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    root = project / ".airsspec"
    log = root / "contexts" / "agent" / "abc.jsonl"
    assert wait_for(lambda: not jobs_running(project) and "session_ended" in log.read_text(), 60)
    assert not jobs_running(project)
    with Memory.open(project) as memory:
        assert memory.sessions.info("abc")["status"] == "prompt_input_exit"
        assert any(a.text == RULE for a in memory.learnings.list().learnings)
    assert (root / "state" / "hook-jobs.log").read_text() == ""  # the job reported no error


def test_hooks_running_at_once_import_each_line_once(project: Path) -> None:
    """Claude Code runs capture hooks in the background (async): several may import the same
    transcript at the same time."""
    transcript = project / "t" / "abc.jsonl"
    transcript.parent.mkdir()
    transcript.write_text("".join(_line(f"u{i}", "user", f"step {i}", i % 60) for i in range(200)))
    payload = json.dumps({**_payload(transcript), "cwd": str(project)})
    running = [
        subprocess.Popen(
            _command(project, event),
            shell=True,
            cwd=project,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for event in ("PostToolUse", "Stop", "SubagentStop", "PostToolUse")
    ]
    for proc in running:  # all of them started before any finishes
        assert proc.stdin is not None
        proc.stdin.write(payload)
        proc.stdin.close()
    for proc in running:
        assert proc.wait(timeout=120) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
    exported = run_cli("export", "claude-code", "abc", cwd=project)
    assert exported.stdout == transcript.read_bytes()  # each line once, none lost


def test_a_hook_run_by_a_user_records_the_session_as_that_users(tmp_path: Path) -> None:
    project = tmp_path / "project"
    Memory.open(project, create=True).close()
    transcript = tmp_path / "t" / "own.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(_line("u1", "user", "Add rate limiting to the upload API", 1))
    payload = {**_payload(transcript), "cwd": str(project), "prompt": "Add rate limiting"}
    done = run_cli(
        "hook",
        "UserPromptSubmit",
        cwd=project,
        stdin=json.dumps(payload).encode(),
        env={"AIRSSPEC_USER": "alice"},
    )
    assert done.returncode == 0, done.stderr
    with Memory.open(project, user="alice") as alice, Memory.open(project, user="bob") as bob:
        assert "own" in [info.session for info in alice.sessions.list()]
        assert "own" not in [info.session for info in bob.sessions.list()]


def test_recall_gives_a_learning_and_the_message_it_quotes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airsspec.hooks.briefing import recalled

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    rule = "Always sign webhooks with HMAC-SHA256 over the raw body."
    with Memory.open(tmp_path, create=True) as memory:
        said = f"One thing for every endpoint from now on. {rule} Thanks."
        memory.append("abc", {"type": "user", "content": said})
        memory.learnings.add(rule, kind="anchor", session="abc")
        memory.project(("cold",))
        kinds = [h["kind"] for h in memory.search("sign webhooks HMAC raw body", k=5)["hits"]]
        assert "learning" in kinds and "message" in kinds  # both found: the case at hand
        text = recalled(memory, "def", "sign webhooks HMAC raw body", 300)
        assert text.count("HMAC-SHA256 over the raw body") == 1

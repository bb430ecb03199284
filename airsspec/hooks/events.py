"""What each Claude Code hook event does to the memory: ``handle(memory, event, payload)``.

``handle`` is pure in the sense a server needs: it reads the payload Claude Code sent, calls
``Memory``, and returns the JSON Claude Code should get (or None). It never reads stdin, writes
stdout or starts a process; work too slow for a hook (compaction, extraction) is handed to the
caller's ``defer`` as a ``Job`` (the CLI starts a detached process, a server may use a thread),
and runs inline when no ``defer`` is given.

- capture: ``UserPromptSubmit``, ``PostToolUse``, ``Stop``, ``SubagentStop``, ``PreCompact`` and
  ``SessionEnd`` import what is new in the transcript (a line still being written waits for the
  next import); all but ``PostToolUse`` (which fires at every tool call) also import the
  session's subagent transcripts (``<session>/subagents/*.jsonl``, session ``<session>.<agent>``).
- lifecycle: the first prompt starts the session (``start_session``, its first line as the task),
  ``SessionStart`` with ``source: resume`` reopens one that had ended; ``SessionEnd`` ends it
  (``end_session`` with Claude Code's ``reason``, then compaction if due and learnings),
  ``PreCompact`` runs the policies that are due; both as a deferred ``Job``.
- context: ``SessionStart`` answers ``hookSpecificOutput.additionalContext`` built from the
  project's learnings and anchors, the latest summaries of earlier sessions, their open tasks
  (todo items not completed) and what they were about; never raw messages. After Claude Code's
  own compaction (``source: compact``) the session's messages and summary are left out: Claude
  just summarised them. ``UserPromptSubmit`` may add passages recalled for the prompt from
  earlier sessions, within a small budget (off by default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import AirsspecError, HookInputError
from airsspec.memory import validate_session_id

if TYPE_CHECKING:
    from airsspec.memory import Memory

FORMAT = "claude-code"
TASK_CHARS = 200  # a session's task: the first line of its first prompt, at most this long
MAX_STATUS = 200  # a session_ended status: printable, at most this long; another is "other"
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
)


@dataclass(frozen=True)
class Job:
    """Work a hook leaves for later: run the due policies on ``sessions`` (the main one
    first), after ending the main one with ``end_status`` when it is given (and the session
    has not ended already: a second SessionEnd, or the job run again, ends nothing)."""

    sessions: tuple[str, ...]
    end_status: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The job as JSON (what a detached process is given)."""
        return {"sessions": list(self.sessions), "end_status": self.end_status}

    @classmethod
    def from_json(cls, data: Any) -> Job:
        """A job from ``to_json``'s output; ``HookInputError`` for anything else."""
        try:
            listed = data["sessions"]
            if not isinstance(listed, list):
                raise TypeError("sessions is not a list")
            sessions = tuple(validate_session_id(s) for s in listed)
            status = data.get("end_status")
        except (TypeError, KeyError, AttributeError) as exc:
            raise HookInputError(f"not a hook job: {data!r}") from exc
        if not sessions or not (status is None or isinstance(status, str)):
            raise HookInputError(f"not a hook job: {data!r}")
        return cls(sessions, status)


Defer = Callable[[Job], None]


INPUT: dict[str, str] = {
    "session_id": "Claude Code's session id: the airsspec session when no transcript is named",
    "transcript_path": "the session's transcript (JSONL): what is new in it is imported, and its "
    "name is the airsspec session; `~` is expanded; over HTTP only the server's local token "
    "may name one",
    "cwd": "the project folder: the hook runs on the workspace whose airsspec.toml is found "
    "from there (none: the hook does nothing); the CLI's hooks only",
    "source": "SessionStart: startup (default), resume (reopens an ended session), clear or "
    "compact (the briefing leaves out what Claude just summarised)",
    "prompt": "UserPromptSubmit: the prompt; the first one starts the session, its first line "
    "the task (required)",
    "agent_transcript_path": "a subagent's transcript kept outside the session's subagents/ "
    "folder: imported as session SESSION.AGENT; over HTTP only the local token may name one",
    "reason": "SessionEnd: why the session ended, recorded as its status (other when it is not "
    "printable text of at most 200 characters)",
    "hook_event_name": "the earlier `import` hook only: which event it stood for (PostToolUse, "
    "Stop or PreCompact; anything else is Stop)",
}
"""Every field of Claude Code's hook input the hooks read (the rest is ignored), and what it
does: ``docs/reference/hooks.md`` is generated from this, and a test finds every field the
code reads here."""
READS: dict[str, tuple[str, ...]] = {
    "SessionStart": ("session_id", "transcript_path", "cwd", "source", "agent_transcript_path"),
    "UserPromptSubmit": ("session_id", "transcript_path", "cwd", "prompt", "agent_transcript_path"),
    "PostToolUse": ("session_id", "transcript_path", "cwd"),
    "Stop": ("session_id", "transcript_path", "cwd", "agent_transcript_path"),
    "SubagentStop": ("session_id", "transcript_path", "cwd", "agent_transcript_path"),
    "PreCompact": ("session_id", "transcript_path", "cwd", "agent_transcript_path"),
    "SessionEnd": ("session_id", "transcript_path", "cwd", "agent_transcript_path", "reason"),
}
"""The input fields each hook event reads (``INPUT``), for the reference."""

ALIASES = {"session-start": "SessionStart"}  # what earlier installs ran
EARLIER_IMPORT = ("PostToolUse", "Stop", "PreCompact")  # what an earlier "import" hook was


def normalize(event: str, payload: dict[str, Any]) -> str:
    """The hook event an installed hook names (``EVENTS``), whatever install wrote it: an
    earlier name (``session-start``), or the earlier ``import`` hook, which stood for the event
    its payload names (``hook_event_name``: PostToolUse, Stop or PreCompact; else Stop). The CLI
    and the server's hook route both ask here."""
    event = ALIASES.get(event, event)
    if event == "import":
        named = payload.get("hook_event_name")
        return named if named in EARLIER_IMPORT else "Stop"
    return event


def run_job(memory: Memory, job: Job) -> dict[str, Any]:
    """Do what ``job`` says; return what was appended, per session and policy."""
    main, *_ = job.sessions
    done: dict[str, Any] = {}
    # A second SessionEnd (hooks in two scopes, a job run again) ends nothing; the session's
    # learnings are extracted as it ends.
    status = job.end_status
    if status is not None and memory.sessions.end(main, status=status, once=True) is not None:
        done["ended"] = main
    for session in job.sessions:
        try:
            memory.check_session(session)
        except AirsspecError:
            continue  # a subagent whose transcript had nothing to import
        appended = memory.run_policies(session)
        done[session] = {name: len(records) for name, records in appended.items()}
    return done


def session_of(payload: dict[str, Any]) -> str:
    """The airsspec session of the payload: the transcript's name (as an import names it),
    else Claude Code's ``session_id``."""
    transcript = payload.get("transcript_path")
    name = Path(transcript).stem if isinstance(transcript, str) and transcript else None
    given = name or payload.get("session_id")
    if not isinstance(given, str) or not given:
        raise HookInputError(
            "hook input names no session: neither transcript_path nor session_id is a "
            f"non-empty string (got session_id {payload.get('session_id')!r})"
        )
    return validate_session_id(given)


def _transcript(payload: dict[str, Any], key: str = "transcript_path") -> Path | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise HookInputError(f"hook input: {key} is not a path: {value!r}")
    return expand(value, key)


def expand(value: str, key: str) -> Path:
    """The payload's path ``value`` (field ``key``) with ``~`` expanded."""
    try:
        return Path(value).expanduser()
    except RuntimeError as exc:  # ~user of no known user
        raise HookInputError(f"hook input: {key} {value!r}: {exc}") from exc


def _is(test: Callable[[Path], bool], path: Path, key: str) -> bool:
    """``test(path)``; a path the system cannot look at (a name too long, no permission) is
    ``HookInputError`` naming the field, never an ``OSError`` (a server answers that 500)."""
    try:
        return test(path)
    except OSError as exc:
        raise HookInputError(
            f"hook input: {key} cannot be looked at: {exc.strerror or exc}"
        ) from exc


def capture(memory: Memory, payload: dict[str, Any], *, subagents: bool = True) -> int:
    """Import what is new in the payload's transcripts; return the records appended."""
    main = _transcript(payload)
    if main is None:
        raise HookInputError("hook input has no transcript_path")
    paths = [main] if _is(Path.is_file, main, "transcript_path") else []
    if subagents:
        folder = main.with_suffix("") / "subagents"
        paths += [folder] if _is(Path.is_dir, folder, "transcript_path") else []
        agent = _transcript(payload, "agent_transcript_path")
        if (
            agent is not None
            and _is(Path.is_file, agent, "agent_transcript_path")
            and agent.parent != folder
        ):
            paths.append(agent)  # a subagent transcript kept somewhere else
    if not paths:
        return 0  # nothing written yet
    results = memory.import_transcripts(FORMAT, paths, live=True)
    return sum(r.appended for r in results)


def _subagent_sessions(memory: Memory, session: str) -> list[str]:
    prefix = f"{session}."
    return sorted(i.session for i in memory.sessions.list() if i.session.startswith(prefix))


def _start_if_new(memory: Memory, session: str, prompt: str) -> None:
    """The first prompt of a session starts it, with the prompt's first line as its task."""
    try:
        info = memory.sessions.info(session)
    except AirsspecError:
        info = {}
    if info.get("started") is None:
        first = prompt.strip().splitlines()[0] if prompt.strip() else ""
        task = first if len(first) <= TASK_CHARS else first[: TASK_CHARS - 1] + "…"
        memory.sessions.start(session, task=task or None)


def _reopen(memory: Memory, session: str) -> None:
    """A session resumed after it ended is active again, with its task and phase."""
    try:
        info = memory.sessions.info(session)
    except AirsspecError:
        return  # nothing recorded yet
    if info.get("ended"):
        memory.sessions.start(session, task=info.get("task"), phase=info.get("phase"))


def _output(event: str, text: str) -> dict[str, Any] | None:
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def handle(
    memory: Memory,
    event_name: str,
    payload: dict[str, Any],
    *,
    budget: int = 2000,
    recall_budget: int = 0,
    defer: Defer | None = None,
) -> dict[str, Any] | None:
    """Run the hook ``event_name`` on ``payload`` (Claude Code's JSON); return the JSON
    Claude Code should get, or None. ``budget`` bounds the SessionStart context in tokens,
    ``recall_budget`` what a prompt gets recalled (0: nothing); ``defer`` receives the slow
    work (without it, the work runs before ``handle`` returns)."""
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    if event_name not in EVENTS:
        raise HookInputError(f"unknown hook event {event_name!r}; known: {', '.join(EVENTS)}")
    session = session_of(payload)

    def later(job: Job) -> None:
        if defer is None:
            run_job(memory, job)
        else:
            defer(job)

    if event_name == "SessionStart":
        from airsspec.hooks.briefing import briefing

        source = payload.get("source") or "startup"
        if payload.get("transcript_path") and source in ("resume", "compact"):
            capture(memory, payload)
        if source == "resume":
            _reopen(memory, session)
        return _output(event_name, briefing(memory, session, str(source), budget))
    if event_name == "PostToolUse":
        capture(memory, payload, subagents=False)
        return None
    prompt = payload.get("prompt")
    if event_name == "UserPromptSubmit" and not isinstance(prompt, str):
        raise HookInputError("UserPromptSubmit input has no prompt")  # before anything is written
    capture(memory, payload)
    if event_name == "UserPromptSubmit":
        assert isinstance(prompt, str)
        _start_if_new(memory, session, prompt)
        if recall_budget > 0 and prompt.strip():
            from airsspec.hooks.briefing import recalled

            return _output(event_name, recalled(memory, session, prompt, recall_budget))
        return None
    if event_name in ("PreCompact", "SessionEnd"):
        try:
            memory.check_session(session)
        except AirsspecError:
            return None  # nothing was said in this session
        reason = payload.get("reason")
        known = isinstance(reason, str) and 0 < len(reason) <= MAX_STATUS and reason.isprintable()
        status = (reason if known else "other") if event_name == "SessionEnd" else None
        later(Job((session, *_subagent_sessions(memory, session)), status))
    return None

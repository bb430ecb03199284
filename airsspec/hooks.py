"""Claude Code hooks: airsspec as the memory of Claude Code sessions, with no code to write.

``install(project, workspace)`` merges four entries into ``<project>/.claude/settings.json``
(other hooks, and every other setting, are kept as they are; installing twice adds nothing):

- ``SessionStart``: prints the context of the session (or, for a new session, the end of the
  most recent other one), which Claude Code adds to the conversation;
- ``PostToolUse``, ``Stop`` and ``PreCompact``: import the session's transcript
  (``transcript_path``) incrementally, so the log follows the conversation as it happens.

Each entry runs ``<python> -m airsspec -w <workspace> hook <event>``, found by its marker
``airsspec-hook``; ``uninstall`` removes exactly those entries. A hook never blocks Claude Code:
whatever goes wrong is reported on stderr with exit 1, which Claude Code shows and ignores.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from airsspec.memory import Memory
from eventlog.errors import AirsspecError

MARKER = "airsspec-hook"
EVENTS = {
    "SessionStart": "session-start",
    "PostToolUse": "import",
    "Stop": "import",
    "PreCompact": "import",
}


class HookInputError(AirsspecError, ValueError):
    """The JSON Claude Code sent on standard input is not what a hook expects."""


def _settings_path(project: Path) -> Path:
    return project / ".claude" / "settings.json"


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise HookInputError(f"{path}: not valid JSON ({exc}); fix it first") from exc
    if not isinstance(data, dict):
        raise HookInputError(f"{path}: not a JSON object")
    return data


def _command(workspace: Path, action: str) -> str:
    parts = [sys.executable, "-m", "airsspec", "-w", str(workspace.resolve()), "hook", action]
    return f"{shlex.join(parts)}  # {MARKER}"


def _ours(entry: Any) -> bool:
    return isinstance(entry, dict) and any(
        MARKER in str(hook.get("command", "")) for hook in entry.get("hooks", [])
    )


def install(project: Path, workspace: Path) -> Path:
    """Add the airsspec hooks to ``project``'s Claude Code settings; return the settings path."""
    path = _settings_path(project)
    settings = _load(path)
    hooks = settings.setdefault("hooks", {})
    for event, action in EVENTS.items():
        entries = [e for e in hooks.get(event, []) if not _ours(e)]
        entry: dict[str, Any] = {
            "hooks": [{"type": "command", "command": _command(workspace, action), "timeout": 60}]
        }
        if event == "PostToolUse":
            entry["matcher"] = "*"
        hooks[event] = [*entries, entry]
    _write(path, settings)
    return path


def uninstall(project: Path) -> tuple[Path, int]:
    """Remove the airsspec hooks from ``project``'s settings; return the path and how many."""
    path = _settings_path(project)
    settings = _load(path)
    hooks = settings.get("hooks", {})
    removed = 0
    for event in list(hooks):
        kept = [e for e in hooks[event] if not _ours(e)]
        removed += len(hooks[event]) - len(kept)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        settings.pop("hooks", None)
    if path.exists():
        _write(path, settings)
    return path, removed


def _write(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".airsspec-tmp")
    partial.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def read_input(raw: bytes) -> dict[str, Any]:
    """The hook's input (Claude Code's JSON on stdin)."""
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise HookInputError(f"hook input is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise HookInputError("hook input is not a JSON object")
    return data


def import_transcript(memory: Memory, data: dict[str, Any]) -> int:
    """Import what is new in the hook's ``transcript_path``; return the records appended."""
    from eventlog.importers import import_paths

    transcript = data.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        raise HookInputError("hook input has no transcript_path")
    path = Path(transcript).expanduser()
    if not path.is_file():
        return 0  # nothing written yet
    results = import_paths(memory.workspace.log, "claude-code", [path], live=True)
    return sum(r.appended for r in results)


def session_context(memory: Memory, data: dict[str, Any], budget: int) -> str:
    """What a starting Claude Code session should see: its own context when it has history
    (resumed), else the end of the most recent other session."""
    if data.get("transcript_path"):
        import_transcript(memory, data)  # a resumed session: bring its log up to date first
    session = Path(str(data.get("transcript_path", ""))).stem or str(data.get("session_id", ""))
    known = {info.session: info for info in memory.sessions()}
    if session in known and known[session].records:
        text = memory.context(session, budget)
        return f"Memory of this session (airsspec):\n{text}" if text else ""
    others = sorted(
        (i for i in known.values() if i.session != session and i.last_ts),
        key=lambda i: i.last_ts or "",
    )
    if not others:
        return ""
    latest = others[-1].session
    text = memory.context(latest, budget)
    return f"Memory of the previous session {latest} (airsspec):\n{text}" if text else ""

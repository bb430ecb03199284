"""Claude Code hooks: airsspec as the memory of Claude Code sessions, with no code to write.

``airsspec hooks install`` adds one entry per event to a Claude Code settings file
(``settings_file``: user, project or local scope, edited as text, reversible byte for byte);
each entry runs ``airsspec hook <Event>``, which reads Claude Code's JSON on stdin, opens the
workspace of the project the payload's ``cwd`` is in (the nearest ``airsspec.toml``; a project
with none is left alone), and calls ``handle`` (``events``): capture every transcript line, start
and end sessions, compact and extract learnings when a session ends (in a detached process, so
Claude Code never waits), and answer ``SessionStart`` with the project's memory (``briefing``).
No daemon (``airsspec watch``) is needed: what one session learned reaches the next one.

``handle`` touches no process state (no stdin, stdout or child process): a server calls it
in-process with its own ``Memory`` and its own way to run deferred work.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airsspec.errors import HookInputError, HookSettingsError
from airsspec.hooks.events import EVENTS, Defer, Job, expand, handle, normalize, run_job
from airsspec.hooks.settings_file import MARKER, SCOPES, settings_path

TIMEOUT = 60  # seconds Claude Code gives a hook before it stops waiting
BACKGROUND = ("PostToolUse", "Stop", "SubagentStop")  # capture only: nothing to answer


def read_input(raw: bytes) -> dict[str, Any]:
    """The hook's input (Claude Code's JSON on stdin)."""
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise HookInputError(f"hook input is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise HookInputError("hook input is not a JSON object")
    return data


def workspace_for(payload: dict[str, Any], default: Path) -> Path | None:
    """The ``airsspec.toml`` of the project the payload's ``cwd`` is in (``default`` when the
    payload names none); None: no workspace there, so the hook does nothing."""
    from airsspec.memory import Memory

    cwd = payload.get("cwd")
    folder = expand(cwd, "cwd") if isinstance(cwd, str) and cwd else default
    return Memory.find_config(folder)


def python_command() -> list[str]:
    """This interpreter, started so that it never imports from its working directory (``-P``:
    the folder ``-m`` would put first on ``sys.path`` is left off)."""
    return [sys.executable, "-P"]


def command(event: str, scope: str, before: Sequence[str] = (), after: Sequence[str] = ()) -> str:
    """The shell command an entry runs (``before``: global options, ``after``: the hook's).
    A committed (project) file names no personal path: ``airsspec`` is found on PATH (a console
    script: the project's folder is not on its ``sys.path``); the other scopes run this
    interpreter with ``-P``, so the project the hook runs in (Claude Code's working directory,
    any cloned repository) is never on ``sys.path``: nothing is imported from it."""
    program = ["airsspec"] if scope == "project" else [*python_command(), "-m", "airsspec"]
    return f"{shlex.join([*program, *before, 'hook', event, *after])}  # {MARKER}"


def entries(
    scope: str, before: Sequence[str] = (), after: Sequence[str] = (), *, recall: bool = False
) -> dict[str, dict[str, Any]]:
    """One hook group per event, as install writes them. A hook that only captures runs in
    the background (``async``: Claude Code does not wait for it); ``UserPromptSubmit`` too,
    unless it answers with recalled passages (``recall``)."""
    background = {*BACKGROUND, *(() if recall else ("UserPromptSubmit",))}
    groups: dict[str, dict[str, Any]] = {}
    for event in EVENTS:
        run = command(event, scope, before, after)
        hook: dict[str, Any] = {"type": "command", "command": run, "timeout": TIMEOUT}
        if event in background:
            hook["async"] = True
        groups[event] = (
            {"matcher": "*", "hooks": [hook]} if event == "PostToolUse" else {"hooks": [hook]}
        )
    return groups


__all__ = [
    "EVENTS",
    "MARKER",
    "SCOPES",
    "Defer",
    "HookInputError",
    "HookSettingsError",
    "Job",
    "command",
    "entries",
    "handle",
    "normalize",
    "python_command",
    "read_input",
    "run_job",
    "settings_path",
    "workspace_for",
]

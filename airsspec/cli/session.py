"""A session's lifecycle: ``airsspec session start|phase|end|assign|show``.

Each action is a parser of its own: the owner options go with ``start`` only, ``--status`` with
``end`` only, so any other pairing is a usage error (exit 2) before the workspace is opened.
"""

from __future__ import annotations

import argparse
from typing import Any

from airsspec.cli.common import arg, command, command_group, open_memory, print_json
from airsspec.errors import EXIT_OK
from airsspec.memory import Scope, printable

command_group(
    "session",
    "A session's lifecycle. Start it with its task, phase and owner, move it to another "
    "phase, end it, or show its state; see 'airsspec session ACTION --help'.",
)
_SESSION = arg("session", help="the session id")


def _done(args: argparse.Namespace, record: Any, message: str) -> int:
    """Print what an action appended: the record with --json, else one line."""
    if args.json:
        print_json(record.model_dump())
    else:
        print(message)
    return EXIT_OK


@command(
    "session start",
    _SESSION,
    arg("--task", help="what the session is for"),
    arg("--phase", metavar="PHASE", help="its first phase"),
    arg("--user", help="the user who owns it (default: $AIRSSPEC_USER)"),
    arg("--agent", help="the agent that owns it (default: $AIRSSPEC_AGENT)"),
    arg("--project", help="its project (default: $AIRSSPEC_PROJECT)"),
)
def cmd_session_start(args: argparse.Namespace) -> int:
    """Start a session. With its task, phase and owner (user, agent, project: whose memory it
    is; scoped readers see only their own)."""
    owner = {"user": args.user, "agent": args.agent, "project": args.project}
    with open_memory(args) as memory:
        record = memory.sessions.start(args.session, task=args.task, phase=args.phase, **owner)
    message = f"started {args.session} (#{record.seq}), phase {record.phase}"
    if owned := Scope.of(record.__dict__):
        message += f", owned by {owned}"
    return _done(args, record, message)


@command("session phase", _SESSION, arg("phase", help="the new phase"))
def cmd_session_phase(args: argparse.Namespace) -> int:
    """Move a session to another phase (its guidance follows)."""
    with open_memory(args) as memory:
        record = memory.sessions.phase(args.session, args.phase)
    return _done(args, record, f"{args.session} is now in phase {record.phase} (#{record.seq})")


@command(
    "session end",
    _SESSION,
    arg("--status", default="done", help="how it ended (default: done)"),
)
def cmd_session_end(args: argparse.Namespace) -> int:
    """End a session. Its new messages are read for learnings at once."""
    with open_memory(args) as memory:
        record = memory.sessions.end(args.session, status=args.status)
    assert record is not None  # only end(once=True) gives None
    return _done(args, record, f"ended {args.session} (#{record.seq}) with status {args.status}")


@command(
    "session assign",
    _SESSION,
    arg("--user", required=True, help="the user it is given to"),
    arg("--agent", help="its agent (default: none)"),
    arg("--project", help="its project (default: none)"),
)
def cmd_session_assign(args: argparse.Namespace) -> int:
    """Give a session to a user (admins only: run without AIRSSPEC_USER). From then on it is
    that user's: other users no longer read it (a session no user owns is the team's). The
    change is an event of the session's log (session_assigned); the log keeps who owned it."""
    owner = {"user": args.user, "agent": args.agent, "project": args.project}
    with open_memory(args) as memory:
        record = memory.sessions.assign(args.session, **owner)
    owned = Scope.of(record.__dict__)
    return _done(args, record, f"assigned {args.session} (#{record.seq}) to {owned}")


@command("session show", _SESSION)
def cmd_session_show(args: argparse.Namespace) -> int:
    """Show a session's state. Task, phase and guidance, status, files changed, decisions and
    discoveries."""
    with open_memory(args) as memory:
        info = memory.sessions.info(args.session)
    if args.json:
        print_json(info)
        return EXIT_OK
    lines = [f"session {info['session']}: {info.get('status') or 'no lifecycle recorded'}"]
    for key in ("task", "phase", "guidance", "started", "ended", "messages"):
        if info.get(key) is not None:
            lines.append(f"  {key}: {info[key]}")
    for key in ("files_changed", "decisions", "discoveries"):
        values = info.get(key) or []
        lines.append(f"  {key.replace('_', ' ')}: {len(values)}")
        lines += [f"    - {value}" for value in values]
    print(printable("\n".join(lines)))  # stored text: escapes shown, never run
    return EXIT_OK

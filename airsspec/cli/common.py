"""What every command group shares: the command registry (each command declares its options
where it is defined), exit codes, the workspace opener, and output helpers.

Exit codes: 0 success; 1 the log or a check failed (for example ``verify`` found a problem);
2 invalid input or usage (nothing was written).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from airsspec.arguments import whole_number
from airsspec.errors import EXIT_FAILED, EXIT_OK, UsageError

if TYPE_CHECKING:  # the facade is imported by the commands that open a workspace, when they run
    from airsspec.memory import Memory, RunReport

Handler = Callable[[argparse.Namespace], int]

SESSIONS_NAMED = 5
"""At most this many sessions are named on one line of ``project``'s report (the others are
counted)."""


@dataclass(frozen=True)
class Command:
    """One command: its name (``"search"``, or ``"learnings confirm"`` for an action nested
    under its group), help, handler and options; ``aliases`` are other names beside it, listed
    with it (``search (query)``); ``hidden`` are names it had elsewhere in the tree, still
    accepted and never listed (``gc`` for ``learnings gc``)."""

    name: str
    help: str
    handler: Handler
    args: tuple[tuple[tuple[str, ...], dict[str, Any]], ...]
    json_flag: bool
    aliases: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """The help's first sentence: what a command list shows beside the name."""
        return first_sentence(self.help)


@dataclass(frozen=True)
class Group:
    """A command whose actions are commands named ``"name action"``; ``default`` is the action
    run when none is named (``airsspec learnings`` lists)."""

    name: str
    help: str
    default: str | None = None


def first_sentence(text: str) -> str:
    """``text`` up to the end of its first sentence, without the full stop."""
    return text.partition(". ")[0].rstrip(".")


COMMANDS: list[Command] = []
GROUPS: dict[str, Group] = {}


def command_group(name: str, help: str, default: str | None = None) -> None:
    """Declare ``name`` as a command whose actions are commands named ``"name action"``."""
    GROUPS[name] = Group(name, help, default)


def arg(*names: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One option or argument of a command, as ``argparse.add_argument`` takes it."""
    return names, options


def whole(value: str) -> int:
    """An option's whole number, 0 or more, in the digits 0-9 (``arguments.whole_number``, as the
    light client reads it); anything else is the option's usage error (argparse names it)."""
    try:
        return whole_number(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def flag(name: str, help: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A yes-or-no option: ``name`` given means yes (``store_true``), with its ``help``."""
    return arg(name, action="store_true", help=help)


def command(
    name: str,
    *args: tuple[tuple[str, ...], dict[str, Any]],
    json_flag: bool = True,
    aliases: tuple[str, ...] = (),
    hidden: tuple[str, ...] = (),
) -> Callable[[Handler], Handler]:
    """Register the decorated function as command ``name`` with these options (and ``--json``
    unless ``json_flag`` is false); its docstring is the command's help."""

    def register(handler: Handler) -> Handler:
        help = " ".join((handler.__doc__ or "").split())
        COMMANDS.append(Command(name, help, handler, args, json_flag, aliases, hidden))
        return handler

    return register


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (an integer orjson cannot hold, such as a budget
    given as 2**64, is printed exactly by the standard encoder)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write(text + "\n")


def open_memory(args: argparse.Namespace) -> Memory:
    """The workspace the global options name, scoped by the environment
    (``airsspec.memory.ENV_NAMES``); a folder that is not one is refused (exit 2) and
    nothing is created there. ``-c`` and ``-w`` together must name the same workspace
    (``-w`` the config's ``[workspace] path``), else neither is guessed: exit 2."""
    from airsspec.memory import Memory, Scope

    scope: dict[str, Any] = Scope.from_env().to_fields()  # AIRSSPEC_USER, _AGENT, _PROJECT
    if args.config is not None:
        memory = Memory.open(config=args.config, **scope)
        if args.workspace is not None and Path(args.workspace).resolve() != memory.root.resolve():
            memory.close()
            raise UsageError(
                f"-w {args.workspace} and -c {args.config} name different workspaces (the "
                f"config's is {memory.root}): give one of them, or both naming the same"
            )
        return memory
    if args.workspace is not None:
        return Memory.open_workspace(args.workspace, **scope)
    return Memory.discover(**scope)


def output_path(memory: Memory, value: str, option: str, *, folder: bool = False) -> Path:
    """Where an ``-o``/``--out`` option writes, checked before any work: refused when it
    resolves, links followed, to the workspace folder or under it (``airsspec.memory.outside``,
    the facade's own rule), or (``folder``: it names a folder to write into) when it is a file
    already; the error naming ``option``."""
    from airsspec.memory import outside

    path = outside(memory.kernel, value, option)
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{option} {value}: is a file, not a folder to write into")
    return path


def progress_printer() -> Callable[[str, int, int], None] | None:
    """Progress on stderr for long work, only when a person is watching."""
    if not sys.stderr.isatty():
        return None

    def show(tier: str, done: int, total: int) -> None:
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r{tier}: {done}/{total} sessions{end}")
        sys.stderr.flush()

    return show


def report_runs(reports: list[RunReport], as_json: bool, extra: dict[str, Any]) -> int:
    """Print what a catch-up or rebuild did; return the exit code (1 when a session was
    skipped because its log is damaged: the others were projected)."""
    failed = [(r.projector, o) for r in reports for o in r.failed]
    for tier, o in failed:
        print(f"airsspec: error: {tier}: skipped {o.session}: {o.failed}", file=sys.stderr)
    if as_json:
        print_json(
            {
                **extra,
                "tiers": [
                    {
                        "tier": r.projector,
                        "applied": r.applied,
                        "rebuilt": [
                            {"session": o.session, "reason": o.rebuilt_because} for o in r.rebuilt
                        ],
                        "skipped": [{"session": o.session, "reason": o.failed} for o in r.failed],
                    }
                    for r in reports
                ],
            }
        )
    else:
        for r in reports:
            for line in rebuilt_lines(r):
                print(line)
            print(f"{r.projector}: {r.applied} record(s) applied over {len(r.outcomes)} session(s)")
        for key, value in extra.items():
            print(f"{key}: {value}")
    return EXIT_FAILED if failed else EXIT_OK


def rebuilt_lines(report: RunReport) -> list[str]:
    """The sessions ``report`` rebuilt, a line per reason: each names at most
    ``SESSIONS_NAMED`` of its sessions and counts the others (a damaged table rebuilds every
    session for one reason)."""
    because: dict[str, list[str]] = {}
    for outcome in report.rebuilt:
        because.setdefault(str(outcome.rebuilt_because), []).append(outcome.session)
    lines = []
    for reason, sessions in because.items():
        named = ", ".join(sessions[:SESSIONS_NAMED])
        if len(sessions) > SESSIONS_NAMED:
            named = f"{len(sessions):,} sessions ({named} and others)"
        lines.append(f"{report.projector}: rebuilt {named}: {reason}")
    return lines

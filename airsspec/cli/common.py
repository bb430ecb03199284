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

# exit codes and the usage error are declared with every error; commands import them from here
from airsspec.errors import EXIT_FAILED as EXIT_FAILED
from airsspec.errors import EXIT_OK as EXIT_OK
from airsspec.errors import EXIT_USAGE as EXIT_USAGE
from airsspec.errors import UsageError as UsageError
from airsspec.errors import validation_problem as validation_problem

if TYPE_CHECKING:
    from airsspec.memory import Memory
    from projections.engine import RunReport

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, help, handler and options."""

    name: str
    help: str
    handler: Handler
    args: tuple[tuple[tuple[str, ...], dict[str, Any]], ...]
    json_flag: bool


COMMANDS: list[Command] = []
GROUP_HELP: dict[str, str] = {}  # a command named "group action" is nested under its group


def command_group(name: str, help: str) -> None:
    """Declare ``name`` as a command whose actions are commands named ``"name action"``."""
    GROUP_HELP[name] = help


def arg(*names: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One option or argument of a command, as ``argparse.add_argument`` takes it."""
    return names, options


def command(
    name: str, *args: tuple[tuple[str, ...], dict[str, Any]], json_flag: bool = True
) -> Callable[[Handler], Handler]:
    """Register the decorated function as subcommand ``name`` with these options (and
    ``--json`` unless ``json_flag`` is false); its docstring is the command's help."""

    def register(handler: Handler) -> Handler:
        help = " ".join((handler.__doc__ or "").split())
        COMMANDS.append(Command(name, help, handler, args, json_flag))
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
    (``projections.scopes.ENV_NAMES``); a folder that is not one is refused (exit 2) and
    nothing is created there. ``-c`` and ``-w`` together must name the same workspace
    (``-w`` the config's ``[workspace] path``), else neither is guessed: exit 2."""
    from airsspec.errors import NotAWorkspaceError
    from airsspec.memory import Memory
    from airsspec.settings import WorkspaceSettings, find_config
    from airsspec.workspace import Workspace
    from eventlog.layout import Layout
    from projections.scopes import Scope

    scope = Scope.from_env()  # AIRSSPEC_USER, AIRSSPEC_AGENT, AIRSSPEC_PROJECT
    if args.config is not None:
        memory = Memory.open(config=args.config, **scope.to_fields())
        if args.workspace is not None and Path(args.workspace).resolve() != memory.root.resolve():
            memory.close()
            raise UsageError(
                f"-w {args.workspace} and -c {args.config} name different workspaces (the "
                f"config's is {memory.root}): give one of them, or both naming the same"
            )
        return memory
    if args.workspace is not None:
        root = Path(args.workspace)
        if not Layout.is_workspace(root):
            raise NotAWorkspaceError(f"{root}: not an airsspec workspace (run airsspec init)")
        return Memory(Workspace.open(root), scope)
    config = find_config(Path.cwd())
    if config is not None:
        return Memory.open(config=config, **scope.to_fields())
    return Memory.open(Path.cwd() / WorkspaceSettings().path, **scope.to_fields())


def output_path(memory: Memory, value: str, option: str) -> Path:
    """Where an ``-o``/``--out`` option writes: ``value``, refused (``UsageError``) when it
    resolves, links followed, to the workspace folder or anything under it: an output written
    there could overwrite a session's log or a tier's files; or one no file name can hold (a
    lone surrogate: text that is not a name in any encoding)."""
    try:
        target, root = Path(value).resolve(), memory.root.resolve()
    except (UnicodeEncodeError, ValueError) as exc:
        raise UsageError(f"{option} {value!r}: not a path this system can name ({exc})") from exc
    if target == root or root in target.parents:
        raise UsageError(
            f"{option} {value}: inside the workspace {root}; write outside it (the log and "
            "the tiers live there)"
        )
    return target


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
            for o in r.rebuilt:
                print(f"{r.projector}: rebuilt {o.session}: {o.rebuilt_because}")
            print(f"{r.projector}: {r.applied} record(s) applied over {len(r.outcomes)} session(s)")
        for key, value in extra.items():
            print(f"{key}: {value}")
    return EXIT_FAILED if failed else EXIT_OK

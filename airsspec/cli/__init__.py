"""The ``airsspec`` command line: parse arguments, call ``Memory``, format the output.

Commands live in modules by group (``history``, ``tiers``, ``recall``, ``learn``, ``analytics``,
``integrate``), each declaring its options where it is defined; this module assembles the parser
and maps errors to one ``airsspec: error:`` line and an exit code (see ``common``). Nothing heavy
is imported until a command needs it, so a hook calling ``airsspec append`` pays only for the
log.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from airsspec.cli import analytics, history, integrate, learn, privacy, recall, serve, tiers
from airsspec.cli.common import COMMANDS, EXIT_FAILED, EXIT_OK, EXIT_USAGE, GROUP_HELP
from eventlog.errors import AirsspecError, CorruptLogError, LogWriteError

GROUPS = (history, tiers, recall, learn, analytics, integrate, privacy, serve)


def _version() -> str:
    import airsspec

    return f"airsspec {airsspec.__version__}"


class _VersionAction(argparse.Action):
    """``--version``, resolved only when asked for (reading package metadata takes time)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        parser.exit(message=_version() + "\n")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``airsspec: error:`` line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        """Print one ``airsspec: error:`` line and exit 2."""
        command = self.prog.removeprefix("airsspec").strip()
        where = f"{command}: " if command else ""
        self.exit(EXIT_USAGE, f"airsspec: error: {where}{message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    parser = _Parser(
        prog="airsspec",
        description="Auditable, replayable memory for AI agents: a frozen event log and the "
        "tiers projected from it.",
    )
    parser.add_argument(
        "-w",
        "--workspace",
        help="workspace folder (default: [workspace] path "
        "of the nearest airsspec.toml, else ./.airsspec)",
    )
    parser.add_argument("-c", "--config", help="airsspec.toml to use (default: the nearest one)")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rank = {group.__name__: i for i, group in enumerate(GROUPS)}
    nested: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for spec in sorted(COMMANDS, key=lambda c: rank[c.handler.__module__]):
        group, _, action = spec.name.partition(" ")
        if action and group not in nested:
            help = GROUP_HELP.get(group, "")
            outer = sub.add_parser(group, help=help, description=help)
            nested[group] = outer.add_subparsers(dest="action", required=True, metavar="ACTION")
        where = nested[group] if action else sub
        p = where.add_parser(action or spec.name, help=spec.help, description=spec.help)
        p.set_defaults(func=spec.handler)
        if spec.json_flag:
            p.add_argument("--json", action="store_true", help="machine-readable output")
        for names, options in spec.args:
            p.add_argument(*names, **options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code."""
    from compactor.errors import CompactorError
    from eventlog.importers import ImportFailedError
    from eventlog.jsonl_input import InvalidInputError

    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell is asking for completions (see 'completion')
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InvalidInputError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        print(f"nothing appended: {len(exc.errors)} invalid line(s)", file=sys.stderr)
        return EXIT_USAGE
    except ImportFailedError as exc:
        for error in exc.errors:
            print(f"airsspec: error: {error}", file=sys.stderr)
        print(f"nothing imported: {len(exc.errors)} source(s) with problems", file=sys.stderr)
        return EXIT_USAGE
    except AirsspecError as exc:
        from airsspec.daemon import DaemonBusyError

        print(f"airsspec: error: {exc}", file=sys.stderr)
        failed = CorruptLogError | LogWriteError | CompactorError | DaemonBusyError
        return EXIT_FAILED if isinstance(exc, failed) else EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # the machine refused (disk full, file too large, permissions)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"airsspec: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED


__all__ = ["build_parser", "main"]

"""The ``airsspec`` command line: parse arguments, call ``Memory``, format the output.

Commands live in modules by group (``history``, ``tiers``, ``recall``, ``learn``, ``analytics``,
``integrate``), each declaring its options where it is defined; this module assembles the parser
and maps an error to its ``airsspec: error:`` line(s) and its ``exit_code`` (declared with
every error in ``airsspec.errors``); library warnings, logged, become ``airsspec: warning:``
lines. Nothing heavy is imported until a command needs it, so a hook calling ``airsspec
append`` pays only for the log.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from airsspec.cli import analytics, history, integrate, learn, privacy, recall, serve, tiers
from airsspec.cli.common import COMMANDS, GROUP_HELP
from airsspec.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AirsspecError

PACKAGES = ("airsspec", "compactor", "eventlog", "projections")  # whose loggers warn
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


class _WarningLine(logging.Handler):
    """Library log records as ``airsspec: warning: <message>`` lines on stderr (the stream of
    the moment, so a test capturing it sees them). It stands in for Python's last-resort output
    only: once a command configured logging itself (``watch``, ``serve``), it stays quiet."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write the record's line unless the root logger has handlers of its own."""
        if logging.root.handlers:
            return
        try:
            sys.stderr.write(f"airsspec: {record.levelname.lower()}: {record.getMessage()}\n")
        except Exception:  # a broken stderr must not turn a warning into a failure
            self.handleError(record)


_WARNINGS = _WarningLine(logging.WARNING)


def _show_warnings() -> None:
    """Send the project's warnings (and worse) to ``_WARNINGS``, once per process."""
    for name in PACKAGES:
        logger = logging.getLogger(name)
        if _WARNINGS not in logger.handlers:
            logger.addHandler(_WARNINGS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (an error's own ``exit_code``)."""
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell is asking for completions (see 'completion')
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    _show_warnings()
    try:
        return args.func(args)
    except AirsspecError as exc:
        for line in exc.report():
            print(line, file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # the machine refused (disk full, file too large, permissions)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"airsspec: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED


__all__ = ["build_parser", "main"]

"""The ``airsspec`` command line: parse arguments, call ``Memory``, format the output.

Commands live in modules by section (``log``, ``tiers``, ``search``, ``session``,
``learnings``, ``integrate``, ...), each declaring its options where it is defined; a command
with actions (``airsspec learnings confirm``) is a group whose actions are parsers of their own,
so an option of one action is a usage error on another. ``airsspec --help`` lists the commands
under the headings of ``SECTIONS``. This module assembles the parser and maps an error to its
``airsspec: error:`` line(s) and its ``exit_code`` (declared with every error in
``airsspec.errors``); library warnings, logged, become ``airsspec: warning:`` lines.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from airsspec.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, AirsspecError

if TYPE_CHECKING:  # the registry is imported with the commands (renderers need neither)
    from airsspec.cli.common import Command

PACKAGES = ("airsspec", "compactor", "eventlog", "projections")  # whose loggers warn

# The headings of ``airsspec --help``, each with the modules of this package whose commands it
# lists (in the order they are defined there).
SECTIONS = (
    ("log", ("log",)),
    ("projections", ("tiers",)),
    ("search", ("search", "analytics")),
    ("memory across sessions", ("session", "learnings", "privacy")),
    ("integration", ("integrate", "serve")),
)


def _load_commands(command: str | None = None) -> None:
    """Import the command modules (each registers its commands in ``COMMANDS`` as it is
    imported), in the order of ``SECTIONS``: every one, or with ``command``, only until one
    defines it (a command runs without importing the others' modules). Done when the parser is
    built, not when this package is imported: they import the facade, which ``--version`` and
    the light client's renderers (``airsspec.render``) have no use for."""
    from airsspec.cli.common import COMMANDS

    for _, modules in SECTIONS:
        for name in modules:
            importlib.import_module(f"{__name__}.{name}")
            if command is not None and any(_defines(spec, command) for spec in COMMANDS):
                return


def _defines(spec: Command, command: str) -> bool:
    """Whether ``spec`` is ``command``, one of its names, or an action of group ``command``."""
    return command in (spec.name.partition(" ")[0], *spec.aliases, *spec.hidden)


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
    """An argument parser whose errors are one ``airsspec: error:`` line (exit 2); a group's
    parser runs its ``default_action`` when the arguments name none."""

    default_action: str | None = None

    def error(self, message: str) -> NoReturn:
        """Print one ``airsspec: error:`` line and exit 2."""
        command = self.prog.removeprefix("airsspec").strip()
        where = f"{command}: " if command else ""
        self.exit(EXIT_USAGE, f"airsspec: error: {where}{message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, the default action first when the arguments start with no action name."""
        if self.default_action is not None and args is not None:
            args = list(args)
            if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help")):
                args.insert(0, self.default_action)
        return super().parse_known_args(args, namespace)


class _RootParser(_Parser):
    """The ``airsspec`` parser: its help lists commands under headings, and an argument no
    command takes is refused by the command it was given to (named in the error)."""

    sections: tuple[tuple[str, list[argparse.Action]], ...] = ()

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse every argument; refuse, as a usage error of their command, any left over."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            owner: argparse.ArgumentParser = getattr(parsed, "parser", self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def format_help(self) -> str:
        """Usage, description, the commands by section, then the global options."""
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for heading, rows in self.sections:
            formatter.start_section(heading)
            formatter.add_arguments(rows)
            formatter.end_section()
        formatter.start_section("options")
        formatter.add_arguments([a for a in self._actions if a.option_strings])
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def _row(name: str, help: str, aliases: Sequence[str] = ()) -> argparse.Action:
    """A line of a command list: the name (and its aliases) and what it does."""
    shown = f"{name} ({', '.join(aliases)})" if aliases else name
    return argparse.Action(option_strings=[], dest=name, metavar=shown, help=help)


def _add(
    where: argparse._SubParsersAction[_Parser], name: str, spec: Command, *, listed: bool
) -> None:
    """Add ``spec`` to ``where`` as ``name``, with its options (help only when ``listed``)."""
    extra: dict[str, Any] = {"help": spec.summary, "aliases": list(spec.aliases)} if listed else {}
    p = where.add_parser(name, description=spec.help, **extra)
    p.set_defaults(func=spec.handler, parser=p)
    if spec.json_flag:
        p.add_argument("--json", action="store_true", help="machine-readable output")
    for names, options in spec.args:
        p.add_argument(*names, **options)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``command``, of that command alone (its group's
    actions, its other names), its module and the ones before it imported (the others are
    not: enough to run it, its help included). A name no command defines gets every command,
    so the error lists them."""
    from airsspec.cli.common import COMMANDS, GROUPS, first_sentence

    _load_commands(command)
    specs = [s for s in COMMANDS if command is not None and _defines(s, command)] or COMMANDS
    parser = _RootParser(
        prog="airsspec",
        description="Auditable, replayable memory for AI agents: a frozen event log and the "
        "projections derived from it. 'airsspec COMMAND --help' tells more.",
    )
    parser.add_argument(
        "-w",
        "--workspace",
        help="workspace folder (default: [workspace] path "
        "of the nearest airsspec.toml, else ./.airsspec)",
    )
    parser.add_argument("-c", "--config", help="airsspec.toml to use (default: the nearest one)")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    nested: dict[str, argparse._SubParsersAction[_Parser]] = {}
    rows: dict[str, argparse.Action] = {}
    for spec in specs:
        group, _, action = spec.name.partition(" ")
        if action and group not in nested:
            declared = GROUPS[group]
            outer = sub.add_parser(group, help=declared.help, description=declared.help)
            outer.default_action = declared.default
            nested[group] = outer.add_subparsers(dest="action", required=True, metavar="ACTION")
        if not action:
            rows[spec.name] = _row(spec.name, spec.summary, spec.aliases)
        _add(nested[group] if action else sub, action or spec.name, spec, listed=True)
        for old in spec.hidden:
            _add(sub, old, spec, listed=False)
    for group, actions in nested.items():  # the group's first sentence, then its actions
        listed = ", ".join(a.dest for a in actions._choices_actions)
        rows[group] = _row(group, f"{first_sentence(GROUPS[group].help)}: {listed}")
    if specs is COMMANDS:  # the root's help lists them (a command's own parser is asked)
        parser.sections = tuple(
            (heading, [rows[name] for name in _names(modules)]) for heading, modules in SECTIONS
        )
    return parser


def _names(modules: Sequence[str]) -> list[str]:
    """The top-level commands the modules (named under this package) define, in order, each
    once."""
    from airsspec.cli.common import COMMANDS

    names = [
        spec.name.partition(" ")[0]
        for module in modules
        for spec in COMMANDS
        if spec.handler.__module__ == f"{__name__}.{module}"
    ]
    return list(dict.fromkeys(names))


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


def _after_globals(argv: Sequence[str]) -> list[str]:
    """``argv`` past the global options given as two items (``-w DIR``, ``-c FILE``)."""
    items = list(argv)
    while items[:1] in (["-w"], ["--workspace"], ["-c"], ["--config"]) and len(items) > 2:
        items = items[2:]
    return items


def _asks_version(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is ``--version`` after global options only: answered before the
    parser (and the commands it imports) is built."""
    return _after_globals(argv) == ["--version"]


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, when it names one right after the global options (None:
    the root's help, an option the root parser must read: every command is loaded)."""
    items = _after_globals(argv)
    return items[0] if items and not items[0].startswith("-") else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (an error's own ``exit_code``)."""
    if _asks_version(sys.argv[1:] if argv is None else argv):
        print(_version())
        return EXIT_OK
    completing = "_ARGCOMPLETE" in os.environ  # the shell asks for completions ('completion')
    parser = build_parser(
        None if completing else _command_named(sys.argv[1:] if argv is None else argv)
    )
    if completing:
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

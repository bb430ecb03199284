"""The ``airsspec`` command line: parse arguments, call the library, format the output.

Exit codes: 0 success; 1 the log or a check failed (for example ``verify`` found a problem);
2 invalid input or usage (nothing was written).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from airsspec.settings import SettingsError
from airsspec.workspace import Workspace, init_workspace
from eventlog.errors import CorruptLogError, EventLogError, InvalidSessionIdError, LogWriteError
from eventlog.ids import normalize_ts
from eventlog.jsonl_input import InvalidInputError, parse_event_lines
from eventlog.render import format_record
from eventlog.verify import verify

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A command-line value that cannot be used."""


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _open(args: argparse.Namespace) -> Workspace:
    return Workspace.open(args.workspace, args.config)


# --------------------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> int:
    config, written = init_workspace(Path(args.dir))
    ws = Workspace.open(config=config)
    if args.json:
        _print_json({"config": str(config), "config_written": written, "workspace": str(ws.root)})
    else:
        print(f"{'created' if written else 'kept existing'} {config}")
        print(f"workspace ready at {ws.root}")
    return EXIT_OK


def cmd_append(args: argparse.Namespace) -> int:
    if args.file in (None, "-"):
        data, source = sys.stdin.buffer.read(), "<stdin>"
    else:
        path = Path(args.file)
        try:
            data, source = path.read_bytes(), str(path)
        except OSError as exc:
            raise UsageError(f"{path}: {exc.strerror}") from exc
    events = parse_event_lines(data, source)
    if not events:
        raise UsageError(f"{source}: no events to append")
    with _open(args) as ws:
        records = ws.log.append_many(args.session, events)
    if args.json:
        _print_json([r.model_dump() for r in records])
    else:
        first, last = records[0].seq, records[-1].seq
        span = f"seq {first}" if first == last else f"seq {first}-{last}"
        print(f"appended {len(records)} record(s) to {args.session} ({span})")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    with _open(args) as ws:
        report = verify(ws.log, args.sessions or None)
    if args.json:
        _print_json(
            {
                "ok": report.ok,
                "records": report.records,
                "sessions": [asdict(s) for s in report.sessions],
            }
        )
        return EXIT_OK if report.ok else EXIT_FAILED
    for s in report.sessions:
        if s.quarantined_bytes:
            print(f"{s.session}: torn tail of {s.quarantined_bytes} bytes moved to quarantine")
        if s.problem:
            p = s.problem
            print(f"FAIL {p.session}: seq {p.seq}, byte offset {p.offset}: {p.message}")
    bad = sum(1 for s in report.sessions if s.problem)
    status = "OK" if report.ok else "FAILED"
    print(
        f"{status}: {len(report.sessions)} session(s), {report.records} record(s) verified"
        + (f", {bad} with problems" if bad else "")
    )
    return EXIT_OK if report.ok else EXIT_FAILED


def _until(value: str | None) -> Callable[[Any], bool]:
    """A predicate 'record is past the --until bound' (a seq or a time)."""
    if value is None:
        return lambda record: False
    if value.isdigit():
        limit = int(value)
        return lambda record: record.seq > limit
    try:
        moment = normalize_ts(value)
    except ValueError as exc:
        raise UsageError(f"--until: {exc}") from exc
    return lambda record: record.ts > moment


def cmd_replay(args: argparse.Namespace) -> int:
    past_end = _until(args.until)
    out = sys.stdout
    with _open(args) as ws:
        if args.session not in ws.log.sessions():
            raise UsageError(f"no session {args.session!r} in {ws.log_dir}")
        seq_of_id: dict[str, int] = {}
        for located in ws.log.read(args.session):
            record = located.record
            seq_of_id[record.id] = record.seq
            if record.seq < args.from_seq:
                continue
            if past_end(record):
                break
            if args.json:
                out.write(located.raw.decode("utf-8") + "\n")
            else:
                out.write(format_record(record, seq_of_id) + "\n")
    return EXIT_OK


def cmd_sessions(args: argparse.Namespace) -> int:
    with _open(args) as ws:
        infos = [ws.log.info(name) for name in ws.log.sessions()]
    if args.json:
        _print_json([asdict(i) for i in infos])
        return EXIT_OK
    if not infos:
        print(f"no sessions in {ws.log_dir}")
        return EXIT_OK
    print(f"{'session':<32} {'records':>8} {'first':<27} {'last':<27} {'bytes':>10}")
    for i in infos:
        print(
            f"{i.session:<32} {i.records:>8} {i.first_ts or '-':<27} {i.last_ts or '-':<27} "
            f"{i.bytes:>10}"
        )
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str, func: Callable[[argparse.Namespace], int], help: str, json_flag: bool = True
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        if json_flag:
            p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = command("init", cmd_init, "create a workspace and a commented airsspec.toml")
    p.add_argument("dir", nargs="?", default=".", help="folder to initialise (default: .)")

    p = command(
        "append",
        cmd_append,
        "append JSON events (one per line) to a session; all "
        "lines are validated first and nothing is appended if any is invalid",
    )
    p.add_argument("session", help="session id")
    p.add_argument("file", nargs="?", help="JSONL file, or - for standard input (default)")

    p = command("verify", cmd_verify, "check schema, seq continuity and the hash chain")
    p.add_argument("sessions", nargs="*", help="sessions to check (default: all)")

    p = command("replay", cmd_replay, "show a session as it happened (exact records with --json)")
    p.add_argument("session")
    p.add_argument(
        "--from", dest="from_seq", type=int, default=1, metavar="SEQ", help="first seq to show"
    )
    p.add_argument("--until", metavar="SEQ|TIME", help="last seq, or an RFC 3339 time, to show")

    command("sessions", cmd_sessions, "list sessions with counts, first/last time and size")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InvalidInputError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        print(f"nothing appended: {len(exc.errors)} invalid line(s)", file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, SettingsError, InvalidSessionIdError, EventLogError) as exc:
        print(f"airsspec: error: {exc}", file=sys.stderr)
        code = EXIT_FAILED if isinstance(exc, CorruptLogError | LogWriteError) else EXIT_USAGE
        return code
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

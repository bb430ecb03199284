"""The log's commands: init, append, verify, seal, replay, sessions, import, export."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from airsspec.cli.common import arg, command, flag, open_memory, output_path, print_json, whole
from airsspec.errors import EXIT_FAILED, EXIT_OK, UsageError
from airsspec.memory import (
    FORMATS,
    Bound,
    Memory,
    VerifyFailedError,
    parse_event_lines,
    printable,
    replay_lines,
)
from airsspec.render import sessions_text


@command(
    "init",
    arg("dir", nargs="?", default=".", help="folder to initialise (default: .)"),
)
def cmd_init(args: argparse.Namespace) -> int:
    """Create a workspace, a commented airsspec.toml, and the workspace's .gitignore (what is
    derived or secret stays out of git)."""
    config, written = Memory.init(args.dir)
    with Memory.open(config=config) as memory:
        root = memory.root
    ignored = True
    try:  # one the user wrote is theirs, and a link (a repository's) is followed nowhere
        with open(Path(root) / ".gitignore", "x", encoding="utf-8") as out:
            out.write(GITIGNORE)
    except FileExistsError:
        ignored = False
    if args.json:
        print_json(
            {
                "config": str(config),
                "config_written": written,
                "workspace": str(root),
                "gitignore_written": ignored,
            }
        )
    else:
        print(f"{'created' if written else 'kept existing'} {config}")
        linked = Path(root).is_symlink()  # a link (a repository's) sends the log elsewhere
        print(f"workspace ready at {root}" + (f" ({Path(root).resolve()})" if linked else ""))
    return EXIT_OK


# What ``init`` keeps out of git in a workspace: the tiers (rebuilt from the log by ``airsspec
# rebuild``), the state (keys, locks, caches) and the server's tokens. The log itself is the
# record an audit may want kept; the line for it is there to uncomment.
GITIGNORE = """\
# Written by airsspec init. Derived from the log (airsspec rebuild makes them again):
knowledge/
# Secret or local: encryption keys, locks, caches, the server's state and tokens:
state/
auth/
# The log itself (every transcript, secrets redacted at append). Uncomment to keep it out too:
# contexts/
"""


@command(
    "append",
    arg("session", help="session id"),
    arg("file", nargs="?", help="JSONL file, or - for standard input (default)"),
    arg(
        "--after",
        type=whole,
        metavar="SEQ",
        help="append only if the session's last record is this seq (0: none yet); else exit 1 "
        "and append nothing",
    ),
)
def cmd_append(args: argparse.Namespace) -> int:
    """Append events to a session. JSON events, one per line; all lines are validated first and
    nothing is appended if any is invalid."""
    if args.file in (None, "-"):
        if sys.stdin is None:
            raise UsageError("standard input is closed: pipe events in, or give a FILE")
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
    with open_memory(args) as memory:
        records = memory.append_many(args.session, events, after=args.after)  # hot follows
    if args.json:
        print_json(records.stored())  # as stored: what ``replay --json`` gives back
    else:
        first, last = records.seq(0), records.seq(-1)  # no model built
        span = f"seq {first}" if first == last else f"seq {first}-{last}"
        print(f"appended {len(records)} record(s) to {args.session} ({span})")
    return EXIT_OK


def _read_key(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        key = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"--key {path}: {exc.strerror}") from exc
    if len(key) < 16:
        raise UsageError(f"--key {path}: a key needs at least 16 bytes (got {len(key)})")
    return key


@command(
    "verify",
    arg("sessions", nargs="*", help="sessions to check (default: all)"),
    arg("--against", metavar="SEAL", help="a seal written by 'airsspec seal'"),
    arg("--key", metavar="FILE", help="the key the seal was signed with"),
    flag(
        "--tiers", "also check every tier's outputs against what was written (project repairs them)"
    ),
)
def cmd_verify(args: argparse.Namespace) -> int:
    """Check the log's integrity. Schema, seq continuity, the hash chain, each session's head,
    and (with --against) that nothing sealed earlier was cut or rewritten."""
    if args.key is not None and args.against is None:
        raise UsageError("--key goes with --against SEAL")
    if args.against is not None and not Path(args.against).is_file():
        raise UsageError(f"--against {args.against}: no such seal file")
    key = _read_key(args.key)
    with open_memory(args) as memory:
        verified = memory.verify(
            args.sessions or None, against=args.against, key=key, projections=args.tiers
        )
    report, tiers, notes, ok = (
        verified,
        verified.projection_problems,
        verified.warnings,
        verified.ok,
    )
    if args.json:
        print_json(
            {
                "ok": ok,
                "records": report.records,
                "sessions": [asdict(s) for s in report.sessions],
                "tiers": tiers,
                "warnings": notes,
            }
        )
        return EXIT_OK if ok else EXIT_FAILED
    for problem in tiers:
        print(f"FAIL tier {problem}")
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    for s in report.sessions:
        if s.quarantined_bytes:
            print(f"{s.session}: torn tail of {s.quarantined_bytes} bytes moved to quarantine")
        for warning in s.warnings:
            print(f"{s.session}: warning: {warning}", file=sys.stderr)
        if s.problem:
            p = s.problem
            print(f"FAIL {p.session}: seq {p.seq}, byte offset {p.offset}: {p.message}")
    bad = sum(1 for s in report.sessions if s.problem)
    status = "OK" if ok else "FAILED"
    against = f" against the seal of {verified.sealed_at}" if verified.sealed_at else ""
    print(
        f"{status}: {len(report.sessions)} session(s), {report.records} record(s) verified"
        + against
        + (f", {bad} with problems" if bad else "")
        + (f"; {len(tiers)} tier problem(s)" if tiers else "")
    )
    return EXIT_OK if ok else EXIT_FAILED


@command(
    "seal",
    arg("--key", metavar="FILE", help="sign the seal with this key (16+ bytes)"),
    arg("-o", "--output", metavar="FILE", help="where to write (default: stdout)"),
)
def cmd_seal(args: argparse.Namespace) -> int:
    """Seal every session's head. The log is verified first; keep the seal outside the
    workspace."""
    key = _read_key(args.key)
    with open_memory(args) as memory:
        if args.output not in (None, "-"):
            output_path(memory, args.output, "--output")
        try:
            seal = memory.seal(key=key)
        except VerifyFailedError as exc:  # a check failed (exit 1), not a mistake of usage
            print(f"airsspec: error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    data = seal.model_dump_json(indent=2, exclude_none=True) + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(data)  # the seal is JSON already
    else:
        Path(args.output).write_text(data, encoding="utf-8")
        signed = "signed" if key is not None else "unsigned"
        if args.json:
            print_json(
                {
                    "sessions": len(seal.sessions),
                    "signed": key is not None,
                    "written_to": args.output,
                    "sealed_at": seal.sealed_at,
                }
            )
            return EXIT_OK
        print(
            f"sealed {len(seal.sessions)} session(s), "
            f"{sum(h.seq for h in seal.sessions.values())} record(s) into {args.output} "
            f"({signed}); check later with: airsspec verify --against {args.output}",
            file=sys.stderr,
        )
    return EXIT_OK


def _until(value: str | None) -> Bound | None:
    """The --until bound: a seq or a time (a bad one is refused, naming the option)."""
    return None if value is None else Bound.parse(value, "--until")


@command(
    "replay",
    arg("session"),
    arg("--from", dest="from_seq", type=whole, default=1, metavar="SEQ", help="first seq to show"),
    arg("--until", metavar="SEQ|TIME", help="last seq, or an RFC 3339 time, to show"),
    flag("--meta", "show every record's meta in full"),
)
def cmd_replay(args: argparse.Namespace) -> int:
    """Show a session as it happened. With --json, the exact records."""
    until = _until(args.until)
    with open_memory(args) as memory:
        pairs = memory.replay(args.session, until=until, raw=True, plain=True)
        for _, line in replay_lines(pairs, args.from_seq, stored=args.json, full_meta=args.meta):
            sys.stdout.write(line + "\n")
    return EXIT_OK


@command("sessions")
def cmd_sessions(args: argparse.Namespace) -> int:
    """List sessions with counts, first/last time and size."""
    with open_memory(args) as memory:
        log_dir = memory.log_dir
        infos = memory.sessions.list()
    if args.json:
        print_json([asdict(i) for i in infos])
        return EXIT_OK
    if not infos:
        print(f"no sessions in {log_dir}")
        return EXIT_OK
    sys.stdout.write(sessions_text([asdict(i) for i in infos]))
    for i in infos:
        if i.problem:
            print(f"airsspec: warning: {i.session}: {printable(i.problem)}", file=sys.stderr)
    return EXIT_OK


@command(
    "import",
    arg("format", metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}"),
    arg("paths", nargs="+", type=Path, metavar="PATH", help="files or folders"),
    arg(
        "--session-prefix",
        default="",
        metavar="P",
        help="prefix for the session ids (default: none)",
    ),
    flag(
        "--keep-secrets",
        "store secrets as they are (needed for a byte-exact export); default: redact them",
    ),
)
def cmd_import(args: argparse.Namespace) -> int:
    """Import agent transcripts losslessly. Idempotent: re-importing adds only what is new."""
    with open_memory(args) as memory:
        results = memory.import_transcripts(
            args.format, args.paths, prefix=args.session_prefix, keep_secrets=args.keep_secrets
        )
    if args.json:
        print_json([asdict(r) for r in results])
        return EXIT_OK
    for r in results:
        note = f", {r.already_imported} already imported" if r.already_imported else ""
        print(f"{r.source} -> {r.session}: {r.appended} record(s) appended{note}")
        for where in r.redacted:
            print(f"  redacted a secret at {where}")
    print(f"imported {sum(r.appended for r in results)} record(s) into {len(results)} session(s)")
    return EXIT_OK


@command(
    "export",
    arg("format", metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}, parquet"),
    arg("target", metavar="SESSION|DIR", help="the session to export, or the folder for parquet"),
    arg("-o", "--output", metavar="FILE", help="where to write (default: stdout)"),
)
def cmd_export(args: argparse.Namespace) -> int:
    """Export a session, or the whole log. An imported session goes back in its source format, byte
    for byte; or, with 'parquet DIR',
    the whole log as Parquet for analysis at scale."""
    if args.format == "parquet":
        with open_memory(args) as memory:
            output_path(memory, args.target, "parquet DIR", folder=True)
            written = memory.export_parquet(Path(args.target))
        if args.json:
            print_json({"format": "parquet", "records": written, "written_to": args.target})
        else:
            print(
                f"wrote {written} record(s) as Parquet under {args.target} "
                "(partitioned by session_date)"
            )
        return EXIT_OK
    with open_memory(args) as memory:
        if args.output not in (None, "-"):
            output_path(memory, args.output, "--output")
        data = memory.export(args.target, args.format)
    if args.output in (None, "-"):
        if args.json:  # the source text inside a JSON object, for scripts
            print_json({"session": args.target, "format": args.format, "text": data.decode()})
        else:
            sys.stdout.buffer.write(data)
    else:
        Path(args.output).write_bytes(data)
        if args.json:
            print_json({"session": args.target, "bytes": len(data), "written_to": args.output})
    return EXIT_OK

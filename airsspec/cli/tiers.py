"""The projections' commands: project, rebuild, hot, context, status, compact, visualize,
library, watch."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import orjson

from airsspec.cli.common import (
    Handler,
    arg,
    command,
    flag,
    open_memory,
    output_path,
    print_json,
    progress_printer,
    report_runs,
    whole,
)
from airsspec.errors import (
    EXIT_FAILED,
    EXIT_OK,
    CompactionBusyError,
    CorruptLogError,
    DaemonBusyError,
    NothingToCompactError,
    UsageError,
)
from airsspec.memory import (
    CONTEXT_BUDGET,
    CONTEXT_FORMATS,
    PROJECTIONS,
    Bound,
    context_shares,
    elided_seqs,
    printable,
)
from airsspec.render import status_text

# The options project and rebuild share.
JOBS = arg(
    "--jobs",
    type=whole,
    default=os.cpu_count() or 1,
    help="worker processes for folding sessions (default: one per CPU core)",
)
PROJECTION = arg(
    "--projection",
    "--tier",
    dest="projection",
    choices=(*PROJECTIONS, "all"),
    default="all",
    metavar="NAME",
    help=f"only this projection: {', '.join(PROJECTIONS)} or all (default); --tier is its "
    "earlier name",
)
MAX_TOKENS = 2**63 - 1  # a budget is printed back in JSON, whose integers stop at 64 bits


def tokens(value: str) -> int:
    """A token budget: a whole number (``whole``) up to ``MAX_TOKENS`` (argparse names the
    option if not)."""
    number = whole(value)
    if number > MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"{value}: more tokens than any budget ({MAX_TOKENS})")
    return number


@command(
    "project",
    JOBS,
    PROJECTION,
)
def cmd_project(args: argparse.Namespace) -> int:
    """Bring every projection up to date. Up to the head of the log; also repair any derived file
    that was deleted or changed after it was written (each is checked against its recorded
    SHA-256)."""
    with open_memory(args) as memory:
        reports = memory.project(
            args.projection, jobs=args.jobs, progress=progress_printer(), warn=False, deep=True
        )
    return report_runs(reports, args.json, {})


@command(
    "rebuild",
    JOBS,
    PROJECTION,
    arg(
        "--as-of",
        metavar="SEQ|TIME",
        help="stop each session at this seq, or at this RFC 3339 time",
    ),
    arg("--out", metavar="DIR", help="where --as-of writes (default: ./airsspec-as-of-POINT)"),
    arg(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="ray: rebuild the cold tier on Ray Data (the [ray] extra); local: --jobs processes",
    ),
    arg("--address", metavar="ADDR", help="with --engine ray: the Ray cluster (default: local)"),
)
def cmd_rebuild(args: argparse.Namespace) -> int:
    """Rebuild projections from zero. Deletes them and replays the log; with --as-of, materialise
    them as they were at a point into another folder."""
    run = {"jobs": args.jobs, "progress": progress_printer()}
    if args.address and args.engine != "ray":
        raise UsageError("--address goes with --engine ray")
    if args.as_of is not None and args.engine == "ray":
        raise UsageError("--engine ray rebuilds the live cold tier; --as-of runs locally")
    with open_memory(args) as memory:
        if args.as_of is None:
            if args.out:
                raise UsageError("--out goes with --as-of (a live rebuild writes in place)")
            engine = {"engine": args.engine, "address": args.address}
            return report_runs(memory.rebuild(args.projection, **run, **engine), args.json, {})
        as_of = args.as_of
        point = Bound.parse(as_of, "--as-of")
        out = output_path(
            memory, args.out or f"airsspec-as-of-{as_of.replace(':', '')}", "--out", folder=True
        )
        reports = memory.rebuild(args.projection, as_of=point, out=out, **run)
    return report_runs(reports, args.json, {"as_of": args.as_of, "written_to": str(out)})


@command(
    "hot",
    arg("session"),
    arg(
        "--budget",
        type=tokens,
        metavar="TOKENS",
        help="print format_history: summary then newest messages within TOKENS",
    ),
)
def cmd_hot(args: argparse.Namespace) -> int:
    """Show a session's hot window. With --budget, the prompt text."""
    with open_memory(args) as memory:
        if args.budget is not None:
            text = memory.history(args.session, args.budget)
            if args.json:
                print_json({"session": args.session, "budget": args.budget, "text": text})
            else:
                print(printable(text))
            return EXIT_OK
        # brought up to date (and repaired) first; a folder written by rebuild --as-of holds
        # projections without a log, shown as saved
        window = memory.hot(args.session)
    if args.json:
        print_json(asdict(window))
        return EXIT_OK
    older = f" (+{len(window.overflow)} older, not yet summarised)" if window.overflow else ""
    print(
        f"{window.session}: {len(window.entries)} message(s){older}, {window.tokens} tokens, "
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
        print(printable(f"#{entry.seq:<5} {entry.type:<12} {entry.tokens:>5} tok  {text}"))
    return EXIT_OK


@command(
    "context",
    arg("session"),
    arg(
        "--budget",
        type=tokens,
        default=CONTEXT_BUDGET,
        metavar="TOKENS",
        help=f"the token budget (default {CONTEXT_BUDGET}, as over HTTP and MCP)",
    ),
    arg("--query", metavar="TEXT", help="also recall passages about this"),
    arg("--format", choices=CONTEXT_FORMATS, default="text"),
    flag("--images", "with --format anthropic: sessions moved to the visual tier as image blocks"),
    flag("--thoughts", "keep the agent's thoughts in an API format"),
)
def cmd_context(args: argparse.Namespace) -> int:
    """Print what a session should see next. Within a token budget: for a session with no summary
    yet (or a new one), the latest summaries of the most recent other sessions; with --query,
    recalled passages not already visible; then its own summary and newest messages."""
    with open_memory(args) as memory:
        context, parts = memory.context_parts(
            args.session,
            args.budget,
            query=args.query,
            format=args.format,
            images=args.images,
            thoughts=args.thoughts,
        )
        if not memory.has_session(args.session):
            print(
                f"airsspec: note: no session {args.session!r} yet; showing what other sessions "
                "left",
                file=sys.stderr,
            )
    truncated = elided_seqs(context)  # the messages shown cut, the newest among them
    if truncated:
        cut = ", ".join(f"#{seq}" for seq in truncated)
        print(f"airsspec: note: shown cut to fit the budget: {cut}", file=sys.stderr)
    if not isinstance(context, list) and not args.json:
        print(printable(context))  # the parts' tokens are not shown: never counted
        return EXIT_OK
    head = {
        "session": args.session,
        "budget": args.budget,
        "truncated": truncated,
        "parts": context_shares(parts, args.budget),
    }
    if isinstance(context, list):  # a format's list, to pass as the SDK's ``messages``
        print_json({**head, "messages": context})
    else:
        print_json({**head, "context": context})
    return EXIT_OK


@command("status")
def cmd_status(args: argparse.Namespace) -> int:
    """Show each projection's state. Size, items and lag of every tier, and what is degraded."""
    with open_memory(args) as memory:
        overview = memory.overview()
    if args.json:
        print_json(overview)
        return EXIT_OK
    sys.stdout.write(status_text(overview))
    return EXIT_OK


def _listed(
    items: list[dict[str, Any]], as_json: bool, empty: str, line: Callable[[dict[str, Any]], str]
) -> int:
    """Print ``items`` as one JSON array, or a ``line`` each (``empty`` when there is none)."""
    if as_json:
        print_json(items)
        return EXIT_OK
    if not items:
        print(empty)
    for item in items:
        print(line(item))
    return EXIT_OK


def _tier_move(name: str, sessions: str, force: str) -> Callable[[Handler], Handler]:
    """The command ``name``, which moves sessions down a tier as its policy says: of the
    ``sessions`` given (what it does without them: their help), ``--force`` moving those the
    policy would leave (its help)."""
    return command(
        name,
        arg("sessions", nargs="*", help=sessions),
        flag("--force", force),
    )


@_tier_move(
    "compact",
    sessions="sessions to consider (default: all)",
    force="compact even if within budget",
)
def cmd_compact(args: argparse.Namespace) -> int:
    """Compact sessions over budget. Summarise the oldest half of what they hold uncovered, for
    those over their token threshold, into the warm library. Hot and warm follow at once; the cold
    tier follows in project, query and watch."""
    results = []
    damaged: list[str] = []
    with open_memory(args) as memory:
        sessions = args.sessions or [info.session for info in memory.sessions.list()]
        for session in sessions:
            memory.check_session(session)
        for session in sessions:
            try:
                record = memory.compact(session, force=args.force)
            except (NothingToCompactError, CompactionBusyError) as exc:
                results.append({"session": session, "compacted": False, "why": str(exc)})
                continue
            except CorruptLogError as exc:  # named; the other sessions are still compacted
                print(f"airsspec: error: {exc}", file=sys.stderr)
                damaged.append(session)
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
    exit_code = EXIT_FAILED if damaged else EXIT_OK
    if args.json:
        print_json(results)
        return exit_code
    for r in results:
        if not r["compacted"]:
            print(f"{r['session']}: not compacted: {r['why']}")
            continue
        fallback = r["summarizer"].get("fallback_from")
        used = r["summarizer"]["backend"] + (f" (fallback from {fallback})" if fallback else "")
        print(
            f"{r['session']}: history-{r['library_no']:03d}.md covers #{r['from_seq']}-"
            f"#{r['to_seq']} ({_count(r['messages'], 'message')}, {_count(r['chunks'], 'chunk')}, "
            f"{used}); hot "
            f"window {r['tokens_before']} -> {r['tokens_after']} tokens ({r['reason']})"
        )
    return exit_code


@_tier_move(
    "visualize",
    sessions="sessions to move with --force (default: the policy's)",
    force="move even within [visual] warm_sessions",
)
def cmd_visualize(args: argparse.Namespace) -> int:
    """Move the oldest warm sessions to images. Once a project has more than [visual]
    warm_sessions sessions whose latest summary is read as text, the oldest move to PNG pages of
    that summary (knowledge/visual/), recorded as a visualized event; nothing is deleted."""
    with open_memory(args) as memory:
        records = memory.visualize(args.sessions or None, force=args.force)
    moved = [
        {"session": r.session, "library_no": r.library_no, "seq": r.seq, "reason": r.reason}
        for r in records
    ]
    return _listed(
        moved,
        args.json,
        "nothing to move: no project holds more warm sessions than [visual] warm_sessions",
        lambda m: (
            f"{m['session']}: history-{m['library_no']:03d}.md moved to images as "
            f"summary-{m['library_no']:03d}.png ({m['reason']})"
        ),
    )


@command(
    "library",
    arg("--show", type=whole, metavar="NNN", help="print history-NNN.md"),
)
def cmd_library(args: argparse.Namespace) -> int:
    """List the warm library's history-NNN.md files."""
    with open_memory(args) as memory:
        if args.show is not None:
            found = memory.library_file(args.show)
            if found is None:
                raise UsageError(f"no history-{args.show:03d}.md in the warm library")
            entry, text = found
            if args.json:
                print_json({**entry, "text": text})
            else:
                sys.stdout.write(text)
            return EXIT_OK
        entries = memory.library()
    return _listed(
        entries,
        args.json,
        "the library is empty: nothing has been compacted yet",
        lambda e: (
            f"{e['file']}  {e['session']:<28} covers #1-#{e['to_seq']} (this compaction "
            f"#{e['from_seq']}-#{e['to_seq']}), summary {e['summary_tokens']} tokens, {e['ts']}"
        ),
    )


class _JsonLines(logging.Formatter):
    """``watch --json``: one JSON object per log line (time, level, message)."""

    def format(self, record: logging.LogRecord) -> str:
        """One log record as a JSON object on one line."""
        return orjson.dumps(
            {
                "ts": self.formatTime(record),
                "level": record.levelname,
                "message": record.getMessage(),
            }
        ).decode()


@command(
    "watch",
    arg("--log-level", default="info", choices=("debug", "info", "warning", "error")),
)
def cmd_watch(args: argparse.Namespace) -> int:
    """Keep every projection current as agents append. One daemon per workspace; stop with
    Ctrl-C or SIGTERM."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        _JsonLines() if args.json else logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    )
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    if args.log_level != "debug":
        logging.getLogger("watchfiles").setLevel(logging.WARNING)  # a line per change is noise
    with open_memory(args) as memory:
        from airsspec.daemon import Daemon

        daemon = Daemon(memory)
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


def _count(n: int, what: str) -> str:
    """``n`` and ``what``, plural unless one: "1 chunk", "2 chunks"."""
    return f"{n} {what}{'' if n == 1 else 's'}"

"""What crosses sessions: session lifecycle, learnings, extraction, housekeeping and health."""

from __future__ import annotations

import argparse
from typing import Any

from airsspec.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    arg,
    command,
    open_memory,
    output_path,
    print_json,
)
from eventlog.render import printable
from projections.scopes import Scope

_AS_OF = arg("--as-of", metavar="TIME", help="as things stood at this RFC 3339 time (default: now)")


@command(
    "session",
    arg("action", choices=("start", "end", "phase", "show")),
    arg("session", help="the session id"),
    arg("phase", nargs="?", help="the new phase (with 'phase')"),
    arg("--task", help="what the session is for (with 'start')"),
    arg("--phase", dest="start_phase", metavar="PHASE", help="its first phase (with 'start')"),
    arg("--status", default="done", help="how it ended (with 'end'; default: done)"),
    arg("--user", help="the user who owns it (with 'start'; default: $AIRSSPEC_USER)"),
    arg("--agent", help="the agent that owns it (with 'start'; default: $AIRSSPEC_AGENT)"),
    arg("--project", help="its project (with 'start'; default: $AIRSSPEC_PROJECT)"),
)
def cmd_session(args: argparse.Namespace) -> int:
    """Start a session with its task, phase and owner (user, agent, project: whose memory
    it is; scoped readers see only their own), move it to another phase, end it (its new
    messages are read for learnings at once), or show its state: task, phase and guidance,
    status, files changed, decisions and discoveries."""
    if args.action == "phase" and not args.phase:
        raise UsageError("session phase: name the new phase (airsspec session phase S improve)")
    if args.action != "phase" and args.phase:
        raise UsageError(f"session {args.action}: unexpected argument {args.phase!r}")
    owner = {"user": args.user, "agent": args.agent, "project": args.project}
    if args.action != "start" and any(owner.values()):
        raise UsageError(f"session {args.action}: --user, --agent and --project go with start")
    with open_memory(args) as memory:
        if args.action == "start":
            record = memory.sessions.start(
                args.session, task=args.task, phase=args.start_phase, **owner
            )
            message = f"started {args.session} (#{record.seq}), phase {record.phase}"
            if owned := Scope.of(record.__dict__):
                message += f", owned by {owned}"
        elif args.action == "phase":
            record = memory.sessions.phase(args.session, args.phase)
            message = f"{args.session} is now in phase {record.phase} (#{record.seq})"
        elif args.action == "end":
            record = memory.sessions.end(args.session, status=args.status)
            message = f"ended {args.session} (#{record.seq}) with status {args.status}"
        else:
            info = memory.sessions.info(args.session)
            if args.json:
                print_json(info)
            else:
                _show_session(info)
            return EXIT_OK
    if args.json:
        print_json(record.model_dump())
    else:
        print(message)
    return EXIT_OK


def _show_session(info: dict[str, Any]) -> None:
    lines = [f"session {info['session']}: {info.get('status') or 'no lifecycle recorded'}"]
    for key in ("task", "phase", "guidance", "started", "ended", "messages"):
        if info.get(key) is not None:
            lines.append(f"  {key}: {info[key]}")
    for key in ("files_changed", "decisions", "discoveries"):
        values = info.get(key) or []
        lines.append(f"  {key.replace('_', ' ')}: {len(values)}")
        lines += [f"    - {value}" for value in values]
    print(printable("\n".join(lines)))  # stored text: escapes shown, never run


def _row(a: Any) -> str:
    text = a.text if len(a.text) <= 90 else a.text[:89] + "\u2026"
    state = a.level if a.status == "active" else a.status
    return printable(
        f"{a.id}  {state:<10} {a.kind:<10} {a.priority:>3}  {a.confidence:.2f}  {text}"
    )


@command(
    "learnings",
    arg(
        "action",
        nargs="?",
        default="list",
        choices=("list", "show", "add", "confirm", "reject"),
        help="list (default), show ID, add TEXT, confirm ID, reject ID",
    ),
    arg("target", nargs="?", metavar="ID|TEXT", help="the learning's id (or a prefix), or text"),
    arg(
        "--session",
        help="list: as this session sees them; show: record an explicit recall "
        "by it; add: record in its log",
    ),
    arg(
        "--kind",
        default="preference",
        help="add: correction, preference, pattern, decision, "
        "error_fix or anchor (default: preference)",
    ),
    arg("--scope", default="project", help="add: session, project or global (default: project)"),
    arg("--tier", choices=("hot", "warm", "cold"), help="list: only this tier"),
    arg("--all", action="store_true", help="list: also rejected, superseded, merged, archived"),
    arg("--reason", default="", help="confirm, reject: why (recorded)"),
    _AS_OF,
)
def cmd_learnings(args: argparse.Namespace) -> int:
    """List what the memory learned across sessions (tier, kind, priority, confidence), show
    one with its evidence and conflicts, add one yourself, or confirm or reject one (a
    rejected learning never reaches a prompt again)."""
    needs_target = args.action != "list"
    if needs_target and not args.target:
        raise UsageError(f"learnings {args.action}: name the learning (or give its text)")
    if not needs_target and args.target:
        raise UsageError(f"learnings list: unexpected argument {args.target!r}")
    with open_memory(args) as memory:
        if args.action == "list":
            assessment = memory.learnings.list(reader=args.session, now=args.as_of)
            chosen = [
                a
                for a in assessment.learnings
                if (args.all or a.status == "active") and (not args.tier or a.level == args.tier)
            ]
            chosen.sort(key=lambda a: (a.status != "active", -a.priority, a.ts, a.id))
            if args.json:
                print_json({"now": assessment.now, "learnings": [a.to_json() for a in chosen]})
            else:
                print(f"{len(chosen)} learning(s) as of {assessment.now}")
                for a in chosen:
                    print(_row(a))
            return EXIT_OK
        if args.action == "show":
            found = memory.learnings.get(args.target, reader=args.session)
            conflicts = [
                c.to_json()
                for c in memory.learnings.list().conflicts
                if found.id in (c.learning_a, c.learning_b)
            ]
            if args.json:
                print_json({**found.to_json(), "conflicts": conflicts})
            else:
                print(_row(found))
                print(
                    f"  scope {found.scope}, source {found.source}, recorded {found.ts} in "
                    f"{found.session} #{found.seq}; accessed {found.access_count} time(s)"
                )
                for e in found.evidence:
                    print(
                        f"  evidence: {e['session']} #{e['seq']} (airsspec replay "
                        f"{e['session']} --from {e['seq']} --until {e['seq']})"
                    )
                for c in conflicts:
                    print(
                        f"  conflict: {c['learning_a']} vs {c['learning_b']}: {c['resolution']}"
                        f", winner {c['winner']} ({c['reason']})" + (" OPEN" if c["open"] else "")
                    )
            return EXIT_OK
        if args.action == "add":
            record = memory.learnings.add(
                args.target, kind=args.kind, scope=args.scope, session=args.session
            )
            result = {
                "learning_id": record.learning_id,
                "session": record.session,
                "seq": record.seq,
            }
            message = f"added {record.learning_id} ({args.kind}, {args.scope})"
        else:
            verdict = "confirmed" if args.action == "confirm" else "rejected"
            record = memory.learnings.feedback(args.target, verdict, reason=args.reason)
            result = {"learning_id": record.learning_id, "verdict": verdict, "seq": record.seq}
            message = f"{verdict} {record.learning_id}"
    if args.json:
        print_json(result)
    else:
        print(message)
    return EXIT_OK


@command(
    "extract",
    arg("session", nargs="?", help="only this session (default: every session that is due)"),
    arg("--force", action="store_true", help="read the new messages even if not due"),
)
def cmd_extract(args: argparse.Namespace) -> int:
    """Read sessions' new messages for learnings now (the daemon does this as they arrive):
    every session with enough new messages, or one session."""
    with open_memory(args) as memory:
        names = (
            [memory.check_session(args.session)]
            if args.session
            else [s.session for s in memory.sessions.list() if s.problem is None]
        )
        found: dict[str, int] = {}
        for name in names:
            records = memory.learnings.extract(name, force=args.force)
            if records:
                found[name] = sum(r.type == "learning" for r in records)
    if args.json:
        print_json({"sessions": found})
    else:
        for name, count in found.items():
            print(f"{name}: {count} learning(s)")
        print(f"extracted {len(found)} session(s)")
    return EXIT_OK


@command(
    "gc", arg("--dry-run", action="store_true", help="only say what would be archived"), _AS_OF
)
def cmd_gc(args: argparse.Namespace) -> int:
    """Archive learnings that should no longer be loaded: rejected, superseded and merged ones,
    and cold ones nobody confirmed that were inactive for gc_days. Nothing is deleted
    (airsspec restore brings one back)."""
    with open_memory(args) as memory:
        chosen = memory.learnings.gc(dry_run=args.dry_run, now=args.as_of)
    if args.json:
        print_json({"dry_run": args.dry_run, "archived": chosen})
    else:
        for learning_id, why in sorted(chosen.items()):
            print(f"{learning_id}  {why}")
        verb = "would archive" if args.dry_run else "archived"
        print(f"{verb} {len(chosen)} learning(s)")
    return EXIT_OK


@command(
    "archive",
    arg("--older-than", required=True, metavar="DURATION", help="inactive this long: 30d, 12h, 2w"),
    _AS_OF,
)
def cmd_archive(args: argparse.Namespace) -> int:
    """Archive every learning (anchors aside) with no activity for a duration: it is no longer
    loaded or searched, and airsspec restore brings it back."""
    with open_memory(args) as memory:
        chosen = memory.learnings.archive(args.older_than, now=args.as_of)
    if args.json:
        print_json({"archived": chosen})
    else:
        print(f"archived {len(chosen)} learning(s)" + (": " + ", ".join(chosen) if chosen else ""))
    return EXIT_OK


@command("restore", arg("--id", required=True, dest="learning_id", help="the learning's id"))
def cmd_restore(args: argparse.Namespace) -> int:
    """Bring an archived learning back."""
    with open_memory(args) as memory:
        record = memory.learnings.restore(args.learning_id)
    if args.json:
        print_json({"restored": record.learning_id, "seq": record.seq})
    else:
        print(f"restored {record.learning_id}")
    return EXIT_OK


@command("health", _AS_OF)
def cmd_health(args: argparse.Namespace) -> int:
    """Capacity used per learnings tier, pending promotions and demotions, conflicts, and each
    tier's lag and damage; exit 1 when something needs attention."""
    with open_memory(args) as memory:
        report = memory.learnings.health(now=args.as_of)
    if args.json:
        print_json(report)
    else:
        cap = report["capacity"]
        print(
            f"learnings as of {report['now']}: hot {cap['hot']['items']}/{cap['hot']['limit']}"
            f", warm {cap['warm']['items']}/{cap['warm']['limit']}, cold {cap['cold']['items']}"
            f", archived {cap['archived']}"
        )
        pending = report["pending"]
        print(
            f"pending: {len(pending['promotions'])} promotion(s), "
            f"{len(pending['demotions'])} demotion(s) within a week, "
            f"{len(pending['gc'])} for gc"
        )
        print(f"conflicts: {len(report['conflicts'])} resolved, {report['open_conflicts']} open")
        for p in report["projections"]:
            print(f"{p['projection']}: lag {p['lag']}, degraded {len(p['degraded'])}")
        for line in report["attention"]:
            print(f"attention: {line}")
        if not report["attention"]:
            print("all well")
    return EXIT_FAILED if report["attention"] else EXIT_OK


@command(
    "reextract",
    arg(
        "--out",
        metavar="DIR",
        help="an empty folder outside the workspace (default: a new temporary folder)",
    ),
    arg("--summarizer", choices=("extractive", "anthropic"), help="default: the configured one"),
    arg("--extractor", choices=("rules", "anthropic"), help="default: the configured one"),
)
def cmd_reextract(args: argparse.Namespace) -> int:
    """Replay the log with another summarizer or extractor into a separate folder and print what
    changed: summaries and learnings added, removed and changed. The live tiers and the log are
    untouched."""
    import tempfile

    out = args.out or tempfile.mkdtemp(prefix="airsspec-reextract-")
    with open_memory(args) as memory:
        output_path(memory, out, "--out")
        diff = memory.learnings.reextract(out, summarizer=args.summarizer, extractor=args.extractor)
    if args.json:
        print_json(diff)
        return EXIT_OK
    print(
        f"replayed into {diff['out']} (summarizer {diff['summarizer']}, "
        f"extractor {diff['extractor']})"
    )
    for part in ("summaries", "learnings"):
        for change, items in diff[part].items():
            print(f"{part} {change}: {len(items)}")
            for item in items:
                text = item.get("text") or item.get("summary") or item.get("after", "")
                first = text.splitlines()[0] if text else ""
                print(f"  {item['session']}: {first[:100]}")
    return EXIT_OK

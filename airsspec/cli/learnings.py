"""What the memory learned across sessions: ``airsspec learnings ACTION``.

Actions: list (the default), show, add, confirm, reject, edit; extract, gc, archive, restore,
reextract, health. Each is a parser of its own with its own options. The housekeeping actions
were once top-level commands (``airsspec gc``): those names still run them and are not listed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from airsspec.cli.common import (
    arg,
    command,
    command_group,
    flag,
    open_memory,
    output_path,
    print_json,
    whole,
)
from airsspec.errors import EXIT_FAILED, EXIT_OK, UsageError
from airsspec.memory import FACT_KINDS, LEVELS, printable
from airsspec.render import learning_row, learnings_shown, learnings_text

command_group(
    "learnings",
    "What the memory learned across sessions. List (the default), show, add, confirm, "
    "reject or edit learnings, and keep them tidy; see 'airsspec learnings ACTION --help'.",
    default="list",
)
_AS_OF = arg("--as-of", metavar="TIME", help="as things stood at this RFC 3339 time (default: now)")
_ID = arg("target", metavar="ID", help="the learning's id (or a unique prefix)")
_REASON = arg("--reason", default="", help="why (recorded)")
_BY = arg(
    "--by", metavar="NAME", help="who curates, recorded (default: AIRSSPEC_USER, else your login)"
)


@command(
    "learnings list",
    arg("--session", help="as this session sees them"),
    arg(
        "--level",
        "--tier",
        dest="level",
        choices=LEVELS,
        help="only learnings at this level (--tier is its earlier name)",
    ),
    flag("--all", "also rejected, superseded, merged, archived"),
    _AS_OF,
)
def cmd_learnings_list(args: argparse.Namespace) -> int:
    """List learnings. Each with its tier, kind, priority, confidence."""
    with open_memory(args) as memory:
        assessment = memory.learnings.list(reader=args.session, now=args.as_of)
    every = [a.to_json() for a in assessment.learnings]
    shown = learnings_shown(every, every=args.all, level=args.level)
    if args.json:
        print_json({"now": assessment.now, "learnings": shown})
    else:
        sys.stdout.write(learnings_text(assessment.now, shown, printable))
    return EXIT_OK


@command(
    "learnings show",
    _ID,
    arg("--session", help="record an explicit recall by this session"),
)
def cmd_learnings_show(args: argparse.Namespace) -> int:
    """Show one learning with its evidence and conflicts."""
    with open_memory(args) as memory:
        found = memory.learnings.get(args.target, reader=args.session)
        conflicts = [
            c.to_json()
            for c in memory.learnings.list().conflicts
            if found.id in (c.learning_a, c.learning_b)
        ]
    if args.json:
        print_json({**found.to_json(), "conflicts": conflicts})
        return EXIT_OK
    print(learning_row(found.to_json(), printable))
    print(
        f"  scope {found.scope}, source {found.source}, recorded {found.ts} in "
        f"{found.session} #{found.seq}; accessed {found.access_count} time(s)"
    )
    for e in found.evidence:
        print(
            f"  evidence: {e['session']} #{e['seq']} (airsspec replay "
            f"{e['session']} --from {e['seq']} --until {e['seq']})"
        )
    for c in found.curation:
        changed = "".join(f", {k} {c[k]!r}" for k in ("text", "scope") if k in c)
        why = f": {c['reason']}" if c["reason"] else ""
        print(printable(f"  {c['action']} by {c['actor'] or '?'} at {c['ts']}{changed}{why}"))
    for c in conflicts:
        print(
            f"  conflict: {c['learning_a']} vs {c['learning_b']}: {c['resolution']}"
            f", winner {c['winner']} ({c['reason']})" + (" OPEN" if c["open"] else "")
        )
    return EXIT_OK


@command(
    "learnings add",
    arg("target", metavar="TEXT", help="the learning, in your words"),
    arg(
        "--kind",
        default="preference",
        help="correction, preference, pattern, decision, error_fix or anchor (default: preference)",
    ),
    arg("--scope", default="project", help="session, project or global (default: project)"),
    arg("--session", help="record it in this session's log"),
)
def cmd_learnings_add(args: argparse.Namespace) -> int:
    """Add a learning yourself."""
    with open_memory(args) as memory:
        record = memory.learnings.add(
            args.target, kind=args.kind, scope=args.scope, session=args.session
        )
    if args.json:
        print_json(
            {"learning_id": record.learning_id, "session": record.session, "seq": record.seq}
        )
    else:
        print(f"added {record.learning_id} ({args.kind}, {args.scope})")
    return EXIT_OK


def _curated(args: argparse.Namespace, record: Any, done: str) -> int:
    """Print what a verdict or an edit recorded."""
    if args.json:
        print_json(
            {"learning_id": record.learning_id, done: True, "actor": record.actor}
            | {"seq": record.seq}
        )
    else:
        print(f"{done} {record.learning_id} (by {record.actor})")
    return EXIT_OK


def _verdict(args: argparse.Namespace, verdict: str) -> int:
    """Record feedback on one learning and print it."""
    with open_memory(args) as memory:
        record = memory.learnings.feedback(args.target, verdict, reason=args.reason, by=args.by)
    return _curated(args, record, verdict)


@command("learnings confirm", _ID, _REASON, _BY)
def cmd_learnings_confirm(args: argparse.Namespace) -> int:
    """Confirm a learning: it gains confidence and is kept."""
    return _verdict(args, "confirmed")


@command("learnings reject", _ID, _REASON, _BY)
def cmd_learnings_reject(args: argparse.Namespace) -> int:
    """Reject a learning: it never reaches a prompt again."""
    return _verdict(args, "rejected")


@command(
    "learnings edit",
    _ID,
    arg("--text", help="what the learning says from now on"),
    arg("--scope", choices=("session", "project", "global"), help="where it applies from now on"),
    _REASON,
    _BY,
)
def cmd_learnings_edit(args: argparse.Namespace) -> int:
    """Edit a learning's text or scope. The change is an event with who made it; what was
    first recorded stays in the log (airsspec learnings show lists every change)."""
    with open_memory(args) as memory:
        record = memory.learnings.edit(
            args.target, text=args.text, scope=args.scope, reason=args.reason, by=args.by
        )
    return _curated(args, record, "edited")


@command(
    "learnings extract",
    arg("session", nargs="?", help="only this session (default: every session that is due)"),
    flag("--force", "read the new messages even if not due"),
    hidden=("extract",),
)
def cmd_extract(args: argparse.Namespace) -> int:
    """Extract learnings now. The daemon does this as messages arrive; this reads
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
    "learnings gc",
    flag("--dry-run", "only say what would be archived"),
    _AS_OF,
    hidden=("gc",),
)
def cmd_gc(args: argparse.Namespace) -> int:
    """Archive learnings no longer worth loading. These are rejected, superseded and merged ones,
    and cold ones nobody confirmed that were inactive for gc_days. Nothing is deleted
    (airsspec learnings restore brings one back)."""
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
    "learnings archive",
    arg("--older-than", required=True, metavar="DURATION", help="inactive this long: 30d, 12h, 2w"),
    _AS_OF,
    hidden=("archive",),
)
def cmd_archive(args: argparse.Namespace) -> int:
    """Archive learnings inactive for a duration. Anchors aside; an archived one is no longer
    loaded or searched, and airsspec learnings restore brings it back."""
    with open_memory(args) as memory:
        chosen = memory.learnings.archive(args.older_than, now=args.as_of)
    if args.json:
        print_json({"archived": chosen})
    else:
        print(f"archived {len(chosen)} learning(s)" + (": " + ", ".join(chosen) if chosen else ""))
    return EXIT_OK


@command(
    "learnings restore",
    arg("--id", required=True, dest="learning_id", help="the learning's id"),
    hidden=("restore",),
)
def cmd_restore(args: argparse.Namespace) -> int:
    """Bring an archived learning back."""
    with open_memory(args) as memory:
        record = memory.learnings.restore(args.learning_id)
    if args.json:
        print_json({"restored": record.learning_id, "seq": record.seq})
    else:
        print(f"restored {record.learning_id}")
    return EXIT_OK


@command("learnings health", _AS_OF, hidden=("health",))
def cmd_health(args: argparse.Namespace) -> int:
    """Report the memory's health. Capacity used per learnings tier, pending promotions and
    demotions, conflicts, and each tier's lag and damage; exit 1 when something needs attention."""
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
    "learnings reextract",
    arg(
        "--out",
        metavar="DIR",
        help="an empty folder outside the workspace (default: a new temporary folder)",
    ),
    arg("--summarizer", choices=("extractive", "anthropic"), help="default: the configured one"),
    arg("--extractor", choices=("rules", "anthropic"), help="default: the configured one"),
    hidden=("reextract",),
)
def cmd_reextract(args: argparse.Namespace) -> int:
    """Compare another summarizer or extractor. It replays the log into a separate folder and prints
    what changed: summaries and learnings added, removed and changed. The live tiers and the log are
    untouched."""
    import tempfile

    out = args.out or tempfile.mkdtemp(prefix="airsspec-reextract-")
    with open_memory(args) as memory:
        output_path(memory, out, "--out", folder=True)
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


@command(
    "facts",
    arg("query", nargs="?", help="rank the facts by this text (default: every fact, oldest first)"),
    arg("--kind", action="append", choices=FACT_KINDS, help="only this kind (repeatable)"),
    flag("--history", "superseded facts too, with when and what ended them"),
    arg("-k", type=whole, metavar="N", help="at most N facts"),
    _AS_OF,
)
def cmd_facts(args: argparse.Namespace) -> int:
    """What earlier sessions decided, required, changed, fixed and left open, and facts
    about the user, as they held at --as-of (default: now). Each fact names the records it
    came from; with --history, a superseded one says until when it held and which record
    changed it."""
    if args.k is not None and args.k < 1:
        raise UsageError(f"-k must be at least 1 (got {args.k})")
    with open_memory(args) as memory:
        found = memory.facts(
            args.query, as_of=args.as_of, kinds=args.kind, history=args.history, k=args.k
        )
    if args.json:
        print_json(found)
        return EXIT_OK
    print(f"{len(found['facts'])} fact(s) as of {found['as_of'] or 'now'}")
    for fact in found["facts"]:
        where = ", ".join(f"{e['session']} #{e['seq']}" for e in fact["evidence"])
        state = "" if fact["current"] else " (ended)" if fact["ended"] else " (superseded)"
        print(printable(f"- [{fact['kind']}] {fact['text']}  [{where}]{state}"))
        if fact["superseded_by"] is not None:
            by = fact["superseded_by"]
            print(printable(f"    until {fact['until']}, changed by {by['session']} #{by['seq']}"))
    return EXIT_OK

"""The text a command prints from its answer, whichever process computed it.

``airsspec search``, ``sessions``, ``status`` and ``learnings list`` print the same lines
whether the workspace was opened here or a running ``airsspec serve`` answered (through the
light client, ``airsspec.client``): both give these functions the answer as JSON-shaped
data. The module imports nothing beyond the standard library, and sits outside the CLI's
package (whose ``__init__`` imports argparse and logging: half a ``python -c pass`` more), so
the light client pays nothing for it; stored text is escaped by the ``printable`` the caller
passes (the facade's, or its light source).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Printable = Callable[[str], str]


def hits_text(result: dict[str, Any], printable: Printable) -> str:
    """The lines of a ``query_memory`` result: a heading, then each hit with its score,
    kind, where it comes from and the first 200 characters of its text."""
    hits = result["hits"]
    lines = [
        f"{len(hits)} hit(s) for {printable(repr(result['query']))} "
        f"({result['mode']}, {result['timings_ms']['total']:.1f} ms)"
    ]
    for rank, hit in enumerate(hits, start=1):
        if hit["source"] is not None:
            where = f"{hit['source']}:{hit['line_from']}-{hit['line_to']}"
        else:
            span = (
                hit["seq_from"]
                if hit["seq_from"] == hit["seq_to"]
                else f"{hit['seq_from']}-{hit['seq_to']}"
            )
            where = f"{hit['session']} #{span}  {hit['ts']}"
        parts = " ".join(f"{name} {value:.2f}" for name, value in hit["parts"].items())
        lines.append(
            f"{rank:>2}. {hit['score']:.3f}  {hit['kind']}/{hit['type']}  {where}  [{parts}]"
        )
        text = printable(" ".join(hit["text"].split()))
        lines.append(f"    {text[:200]}{'...' if len(text) > 200 else ''}")
    return "".join(f"{line}\n" for line in lines)


def sessions_text(infos: list[dict[str, Any]]) -> str:
    """The table of ``airsspec sessions``: a header, then a row per session (records, first
    and last time, bytes). A session's problem is the caller's to report."""
    rows = [f"{'session':<32} {'records':>8} {'first':<27} {'last':<27} {'bytes':>10}"]
    rows += [
        f"{i['session']:<32} {i['records']:>8} {i['first_ts'] or '-':<27} "
        f"{i['last_ts'] or '-':<27} {i['bytes']:>10}"
        for i in infos
    ]
    return "".join(f"{row}\n" for row in rows)


def status_text(overview: dict[str, Any]) -> str:
    """The lines of ``airsspec status`` from ``Memory.overview()``: the workspace, the log,
    each unreadable session, a line per projection (items, sessions, bytes, lag), then what is
    degraded."""
    log = overview["log"]
    lines = [
        f"workspace {overview['workspace']}",
        f"log: {log['sessions']} session(s), {log['records']} record(s), {log['bytes']:,} bytes",
    ]
    lines += [f"unreadable: {session}: {problem}" for session, problem in log["unreadable"].items()]
    for t in overview["tiers"]:
        late = len(t["behind_sessions"])
        behind = f", behind in {late} session(s)" if late else ""
        held = (  # None: a scoped reader, who is not told what every user's take
            f"{t['items']} item(s) in {t['sessions']} session(s), {t['bytes']:,} bytes"
            if t["items"] is not None
            else f"{t['sessions']} of your session(s)"
        )
        lines.append(f"{t['tier']}: {held}, lag {t['lag_records']} record(s){behind}")
    degraded = overview["degraded"]
    lines.append("degraded: " + ("; ".join(degraded) if degraded else "nothing"))
    return "".join(f"{line}\n" for line in lines)


def learning_row(a: dict[str, Any], printable: Printable) -> str:
    """One learning on a line: id, level (or status when not active), kind, priority,
    confidence and its text (cut at 90 characters)."""
    text = a["text"] if len(a["text"]) <= 90 else a["text"][:89] + "\u2026"
    state = a["level"] if a["status"] == "active" else a["status"]
    return printable(
        f"{a['id']}  {state:<10} {a['kind']:<10} {a['priority']:>3}  {a['confidence']:.2f}  {text}"
    )


def learnings_shown(
    learnings: list[dict[str, Any]], *, every: bool = False, level: str | None = None
) -> list[dict[str, Any]]:
    """The learnings ``airsspec learnings list`` shows, in its order: the active ones (``every``:
    all), at ``level`` when given; active first, then by priority, time and id."""
    chosen = [
        a
        for a in learnings
        if (every or a["status"] == "active") and (not level or a["level"] == level)
    ]
    return sorted(chosen, key=lambda a: (a["status"] != "active", -a["priority"], a["ts"], a["id"]))


def learnings_text(now: str, shown: list[dict[str, Any]], printable: Printable) -> str:
    """The lines of ``airsspec learnings list``: how many as of when, then a row each."""
    rows = [f"{len(shown)} learning(s) as of {now}", *(learning_row(a, printable) for a in shown)]
    return "".join(f"{row}\n" for row in rows)

"""The text a command prints from its answer, whichever process computed it.

``airsspec search`` and ``airsspec sessions`` print the same lines whether the workspace was
opened here or a running ``airsspec serve`` answered (through the light client,
``airsspec.client``): both give these functions the answer as JSON-shaped data. The module
imports nothing beyond the standard library, so the light client pays nothing for it; stored
text is escaped by the ``printable`` the caller passes (the facade's, or its light source).
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

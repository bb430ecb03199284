"""Heads: the seq and hash of each session's last acknowledged record, kept outside its log.

The hash chain proves that no record was changed, but not that none was removed from the end: a
log cut at a record boundary, or emptied, is still a valid chain. The head (``{session}.head``,
beside the log) is rewritten in place after every append, once the records are as durable as
the log's durability mode promises, so it never names a record the log does not hold. ``verify``
checks that the log still holds the record the head names. A head can only lag the log (two
writers racing), never lead it, unless records were lost or removed.

Someone who rewrites the log *and* its head is caught by a seal (``seal``) taken earlier.

A head is one JSON object padded with spaces to ``HEAD_SIZE`` bytes, written with a single
``pwrite`` at offset 0, so it never needs truncating.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from eventlog.errors import HeadError
from eventlog.layout import HEAD_SUFFIX, read_nofollow

HEAD_SIZE = 512


@dataclass(frozen=True, slots=True)
class Head:
    """The last acknowledged record of a session, as its head file names it."""

    session: str
    seq: int
    hash: str | None


def encode_head(session: str, seq: int, digest: str | None, turn: str | None = None) -> bytes:
    """The bytes of a head file. ``turn``: on an object store, the queue marker of a writer
    that asks the others to list the session (other bytes, so another ETag: a store's ETag of
    the same bytes is the same, and an ``If-Match`` on it would still hold); readers ignore it."""
    fields = {"session": session, "seq": seq, "hash": digest}
    data = orjson.dumps(fields if turn is None else fields | {"turn": turn})
    return data.ljust(HEAD_SIZE - 1) + b"\n"


def decode_head_seq(raw: bytes) -> int:
    """The seq a head's bytes name (0 for an empty or unreadable head: nothing acknowledged
    can then be told apart from a torn tail, as before heads existed)."""
    try:
        seq = orjson.loads(raw)["seq"] if raw.strip() else 0
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return 0
    return seq if isinstance(seq, int) else 0


def read_head(log_dir: Path, session: str) -> Head | None:
    """The head of ``session``, or None when it has none; ``HeadError`` when it is damaged."""
    path = log_dir / f"{session}{HEAD_SUFFIX}"
    try:
        raw = read_nofollow(path)
    except FileNotFoundError:
        return None
    if not raw.strip():
        return None  # created, but no append had finished yet
    try:
        data = orjson.loads(raw)
        head = Head(data["session"], data["seq"], data["hash"])
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise HeadError(f"{path}: unreadable head ({exc})") from exc
    if head.session != session or not isinstance(head.seq, int) or head.seq < 0:
        raise HeadError(f"{path}: head names session {head.session!r} seq {head.seq!r}")
    return head


def headed_sessions(log_dir: Path) -> list[str]:
    """Sessions that have a head file (a session whose log was deleted still has one)."""
    if not log_dir.is_dir():
        return []
    return sorted(p.name[: -len(HEAD_SUFFIX)] for p in log_dir.glob(f"*{HEAD_SUFFIX}"))

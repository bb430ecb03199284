"""Verify sessions: schema, seq continuity, the prev/hash chain, canonical bytes, and anchors.

Compaction events are checked against the records they cover (range and hashes). Anchors are
(seq, hash) pairs the log must still hold: the session's head (kept beside the log, see
``heads``) and, when given, a seal taken earlier (see ``seal``). The chain proves every record up
to an anchor unchanged; the anchor proves none of them was removed from the end.

``verify`` is read-only with one exception every reader shares: a torn tail is first quarantined
(see ``recovery``), since it was never acknowledged and is not a fault of the log. Everything else
is reported, never repaired. Each session stops at its first problem, reported with session, seq,
byte offset and what is wrong.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from eventlog.canonical import expected_line
from eventlog.errors import (
    CorruptLogError,
    HeadError,
    NotCanonicalizableError,
    UnsafePathError,
    field_of,
)
from eventlog.exact_json import MAX_DEPTH, bytes_too_deep, too_deep
from eventlog.heads import headed_sessions, read_head
from eventlog.layout import linked_sessions, reader_nofollow, session_path
from eventlog.log import Log
from eventlog.schema import parse_record


@dataclass(frozen=True, slots=True)
class Problem:
    """The first thing wrong with a session: where (seq, byte offset) and what."""

    session: str
    seq: int
    offset: int
    message: str


@dataclass(frozen=True, slots=True)
class Anchor:
    """A record the log must still hold: ``seq`` with ``hash``, and who says so."""

    seq: int
    hash: str | None
    source: str


@dataclass(slots=True)
class SessionReport:
    """What ``verify`` found in one session."""

    session: str
    records: int = 0
    bytes: int = 0
    quarantined_bytes: int = 0
    problem: Problem | None = None
    last_hash: str | None = None
    head_seq: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class VerifyReport:
    """Every session's report; ``ok`` when none has a problem."""

    sessions: list[SessionReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no session has a problem."""
        return all(s.problem is None for s in self.sessions)

    @property
    def records(self) -> int:
        """Records verified, over every session."""
        return sum(s.records for s in self.sessions)


class _CompactionCheck:
    """A compaction event must cover exactly the records after the previous one, up to a record
    before itself, name their first and last hashes, and keep its chunks inside that range.
    Only hashes not yet covered are kept, so memory follows the uncovered tail of the log."""

    def __init__(self) -> None:
        self.uncovered: list[str] = []  # hashes of seq covered_until+1, covered_until+2, ...
        self.covered_until = 0

    def __call__(self, data: dict[str, Any]) -> None:
        if data["type"] == "compaction":
            first, last = data["from_seq"], data["to_seq"]
            if first != self.covered_until + 1:
                raise _Fault(
                    f"compaction covers from seq {first}, but the previous coverage "
                    f"ends at seq {self.covered_until}"
                )
            if not first <= last < data["seq"]:
                raise _Fault(f"compaction range {first}-{last} is not before the event itself")
            if self.uncovered[0] != data["first_hash"]:
                raise _Fault(f"compaction first_hash does not match the record at seq {first}")
            if self.uncovered[last - first] != data["last_hash"]:
                raise _Fault(f"compaction last_hash does not match the record at seq {last}")
            bound = first - 1
            for chunk in data["chunks"]:
                if not bound < chunk["from_seq"] <= chunk["to_seq"] <= last:
                    raise _Fault("compaction chunks overlap or leave the covered range")
                bound = chunk["to_seq"]
            del self.uncovered[: last - first + 1]
            self.covered_until = last
        self.uncovered.append(data["hash"])


def verify_session(log: Log, session: str, sealed: Anchor | None = None) -> SessionReport:
    """Check one session's records, then that it still holds its head and ``sealed``."""
    report = SessionReport(session)
    path: Path = session_path(log.log_dir, session)
    anchors = [] if sealed is None else [sealed]
    try:
        head = read_head(log.log_dir, session)
    except (HeadError, UnsafePathError) as exc:
        report.problem = Problem(session, 0, 0, str(exc))
        return report
    if head is not None:
        report.head_seq = head.seq
        anchors.append(Anchor(head.seq, head.hash, "its head"))
    if path.is_symlink():
        report.problem = Problem(session, 0, 0, str(UnsafePathError(path)))
        return report
    if not path.exists():
        if anchors:
            a = anchors[0]
            message = f"the log is gone, but {a.source} names seq {a.seq}: the log was removed"
        else:
            message = "no such session"
        report.problem = Problem(session, 0, 0, message)
        return report
    with contextlib.suppress(CorruptLogError):  # a corrupt last line is reported below
        report.quarantined_bytes = log.recover(session)
    compactions = _CompactionCheck()
    wanted = {a.seq for a in anchors}
    found: dict[int, str] = {}
    prev: str | None = None
    offset = 0
    seq = 0
    with reader_nofollow(path) as f:
        for seq, raw in enumerate(f, start=1):
            try:
                data = _check_line(raw, session, seq, prev)
                compactions(data)
            except _Fault as fault:
                report.problem = Problem(session, seq, offset, str(fault))
                return report
            prev = data["hash"]
            if bytes_too_deep(raw) and too_deep(data) is not None:
                report.warnings.append(
                    f"seq {seq} is nested more than {MAX_DEPTH} levels deep (stored before input "
                    "was limited): readable, but such input is refused today"
                )
            if seq in wanted:
                found[seq] = prev
            offset += len(raw)
            report.records = seq
    report.bytes = offset
    report.last_hash = prev
    for anchor in anchors:
        if anchor.seq > report.records:
            report.problem = Problem(
                session,
                report.records + 1,
                offset,
                f"the log ends at seq {report.records}, but {anchor.source} names seq "
                f"{anchor.seq}: records were removed from the end",
            )
            return report
        if anchor.seq and found.get(anchor.seq) != anchor.hash:
            report.problem = Problem(
                session,
                anchor.seq,
                0,
                f"the record at seq {anchor.seq} is not the one {anchor.source} names "
                "(the log was rewritten)",
            )
            return report
    if head is None and report.records:
        report.warnings.append(
            "no head file: a cut at a record boundary cannot be detected until the next "
            "append writes one (or check against a seal)"
        )
    return report


class _Fault(Exception):
    """What is wrong with one line."""


def _check_line(raw: bytes, session: str, seq: int, prev: str | None) -> dict[str, Any]:
    """Return the parsed record, or raise ``_Fault`` saying what is wrong with it."""
    if not raw.endswith(b"\n"):
        raise _Fault("incomplete final line (torn tail that could not be quarantined)")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _Fault(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _Fault("not a JSON object")
    try:
        parse_record(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _Fault(f"schema: field '{field_of(err)}': {err['msg']}") from exc
    if data["session"] != session:
        raise _Fault(f"record belongs to session {data['session']!r}")
    if data["seq"] != seq:
        raise _Fault(f"seq {data['seq']} where {seq} was expected (gap, duplicate or reorder)")
    if data["prev"] != prev:
        raise _Fault("prev does not match the hash of the previous record (chain broken)")
    try:
        line, digest = expected_line(data)
    except NotCanonicalizableError as exc:
        raise _Fault(f"cannot canonicalize: {exc}") from exc
    if digest != data["hash"]:
        raise _Fault("hash mismatch: the record's content was changed after it was written")
    if line != raw:
        raise _Fault("bytes differ from the record's canonical form (altered encoding)")
    return data


def verify(
    log: Log,
    sessions: Iterable[str] | None = None,
    sealed: dict[str, Anchor] | None = None,
) -> VerifyReport:
    """Verify ``sessions`` (default: every session with a log, a head, a link where a log
    belongs, or an entry in ``sealed``), each against its head and its ``sealed`` anchor."""
    sealed = sealed or {}
    if sessions is not None:
        names = list(sessions)
    else:
        links = [p.name[: -len(".jsonl")] for p in linked_sessions(log.log_dir)]
        names = sorted({*log.sessions(), *headed_sessions(log.log_dir), *links, *sealed})
    return VerifyReport([verify_session(log, name, sealed.get(name)) for name in names])

"""Verify sessions: schema, seq continuity, the prev/hash chain and canonical bytes.

Compaction events are checked against the records they cover (range and hashes).

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

import orjson
from pydantic import ValidationError

from eventlog.canonical import NotCanonicalizableError, expected_line
from eventlog.errors import CorruptLogError
from eventlog.layout import session_path
from eventlog.log import EventLog
from eventlog.schema import parse_record


@dataclass(frozen=True, slots=True)
class Problem:
    session: str
    seq: int
    offset: int
    message: str


@dataclass(slots=True)
class SessionReport:
    session: str
    records: int = 0
    bytes: int = 0
    quarantined_bytes: int = 0
    problem: Problem | None = None
    last_hash: str | None = None


@dataclass(slots=True)
class VerifyReport:
    sessions: list[SessionReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.problem is None for s in self.sessions)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.sessions)


class _CompactionCheck:
    """A compaction event must cover exactly the records after the previous one, up to a record
    before itself, name their first and last hashes, and keep its chunks inside that range.
    Only hashes not yet covered are kept, so memory follows the uncovered tail of the log."""

    def __init__(self) -> None:
        self.uncovered: list[str] = []  # hashes of seq covered_until+1, covered_until+2, ...
        self.covered_until = 0

    def __call__(self, data: dict) -> None:
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


def verify_session(log: EventLog, session: str) -> SessionReport:
    report = SessionReport(session)
    path: Path = session_path(log.log_dir, session)
    if not path.exists():
        report.problem = Problem(session, 0, 0, "no such session")
        return report
    with contextlib.suppress(CorruptLogError):  # a corrupt last line is reported below
        report.quarantined_bytes = log.recover(session)
    compactions = _CompactionCheck()
    prev: str | None = None
    offset = 0
    seq = 0
    with open(path, "rb") as f:
        for seq, raw in enumerate(f, start=1):
            try:
                data = _check_line(raw, session, seq, prev)
                compactions(data)
            except _Fault as fault:
                report.problem = Problem(session, seq, offset, str(fault))
                return report
            prev = data["hash"]
            offset += len(raw)
            report.records = seq
    report.bytes = offset
    report.last_hash = prev
    return report


class _Fault(Exception):
    """What is wrong with one line."""


def _check_line(raw: bytes, session: str, seq: int, prev: str | None) -> dict:
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
        raise _Fault(f"schema: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from exc
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


def verify(log: EventLog, sessions: Iterable[str] | None = None) -> VerifyReport:
    names = list(sessions) if sessions is not None else log.sessions()
    return VerifyReport([verify_session(log, name) for name in names])

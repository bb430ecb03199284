"""Torn tails are quarantined, corruption is reported (never repaired), tampering is detected,
and records from a newer version survive untouched."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.canonical import encode_record
from eventlog.errors import CorruptLogError
from eventlog.log import EventLog
from eventlog.schema import UnknownRecord
from eventlog.verify import verify


def _quarantined(log_dir: Path, session: str) -> list[bytes]:
    path = log_dir / f"{session}.jsonl.quarantine"
    if not path.exists():
        return []
    return [
        base64.b64decode(json.loads(line)["bytes_b64"]) for line in path.read_text().splitlines()
    ]


def test_torn_tail_is_quarantined_on_read_and_append(log: EventLog, log_dir: Path) -> None:
    log.append_many("s", [{"type": "user", "content": f"m{i}"} for i in range(3)])
    path = log_dir / "s.jsonl"
    intact = path.read_bytes()
    torn = b'{"content":"half a reco'
    with open(path, "ab") as f:
        f.write(torn)
    assert [loc.record.seq for loc in EventLog(log_dir).read("s")] == [1, 2, 3]
    assert path.read_bytes() == intact
    assert _quarantined(log_dir, "s") == [torn]
    assert log.append("s", {"type": "user", "content": "next"}).seq == 4
    assert verify(log).ok


def test_incomplete_batch_is_quarantined_whole(log: EventLog, log_dir: Path) -> None:
    """A crash after two of three lines of one batch: neither line may survive."""
    first = log.append("s", {"type": "user", "content": "kept"})
    path = log_dir / "s.jsonl"
    intact = path.read_bytes()
    prev, lines = first.hash, []
    for i in (1, 2):  # the first two parts of a three-part batch, as a crashed writer left them
        body = {
            "v": 1,
            "id": f"id{i}",
            "session": "s",
            "seq": 1 + i,
            "ts": first.ts,
            "type": "user",
            "prev": prev,
            "content": f"part {i}",
            "batch": [i, 3],
        }
        line, prev = encode_record(body)
        lines.append(line)
    with open(path, "ab") as f:
        f.write(b"".join(lines))
    with EventLog(log_dir) as fresh:
        assert [loc.record.seq for loc in fresh.read("s")] == [1]
    assert path.read_bytes() == intact
    assert _quarantined(log_dir, "s") == [b"".join(lines)]
    assert verify(log).ok


def test_corrupt_middle_line_is_reported_never_repaired(log: EventLog, log_dir: Path) -> None:
    log.append_many("s", [{"type": "user", "content": f"m{i}"} for i in range(3)])
    path = log_dir / "s.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"{this is not json}\n"
    damaged = b"".join(lines)
    path.write_bytes(damaged)
    with pytest.raises(CorruptLogError) as info:
        list(EventLog(log_dir).read("s"))
    assert info.value.seq == 2 and info.value.offset == len(lines[0])
    report = verify(EventLog(log_dir))
    assert not report.ok
    problem = report.sessions[0].problem
    assert (problem.seq, problem.offset) == (2, len(lines[0]))
    assert path.read_bytes() == damaged


def _small_log(log_dir: Path) -> bytes:
    with EventLog(log_dir) as log:
        log.append("s", {"type": "user", "content": "hello é", "meta": {"k": [1, 2.5]}})
        log.append_many(
            "s",
            [
                {"type": "action", "tool": "bash", "params": {"cmd": "ls"}},
                {"type": "observation", "result": {"ok": True}},
            ],
        )
    return (log_dir / "s.jsonl").read_bytes()


def test_every_single_byte_change_is_caught(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    original = _small_log(log_dir)
    path = log_dir / "s.jsonl"
    for position in range(len(original)):
        for replacement in {original[position] ^ 0x01, original[position] ^ 0x20, ord("0")}:
            if replacement == original[position]:
                continue
            damaged = bytearray(original)
            damaged[position] = replacement
            path.write_bytes(bytes(damaged))
            report = verify(EventLog(log_dir)).sessions[0]
            # Caught: either a problem is reported, or the damage cut the last line's newline and
            # the damaged record was moved to quarantine (no longer in the log).
            assert report.problem is not None or report.quarantined_bytes > 0, position
            (log_dir / "s.jsonl.quarantine").unlink(missing_ok=True)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_random_byte_changes_are_caught(tmp_path_factory: pytest.TempPathFactory, data) -> None:
    log_dir = tmp_path_factory.mktemp("flip")
    original = _small_log(log_dir)
    position = data.draw(st.integers(0, len(original) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != original[position]))
    damaged = bytearray(original)
    damaged[position] = value
    (log_dir / "s.jsonl").write_bytes(bytes(damaged))
    report = verify(EventLog(log_dir)).sessions[0]
    assert report.problem is not None or report.quarantined_bytes > 0


def test_records_of_a_newer_version_round_trip(log: EventLog, log_dir: Path) -> None:
    first = log.append("s", {"type": "user", "content": "hi"})
    newer = [
        {
            "v": 2,
            "id": "n1",
            "session": "s",
            "seq": 2,
            "ts": "2030-01-01T00:00:00.000000Z",
            "type": "plan_update",
            "prev": first.hash,
            "steps": ["a", {"b": 1.5}],
            "owner": "x",
        },
    ]
    line, digest = encode_record(newer[0])
    second = {
        "v": 2,
        "id": "n2",
        "session": "s",
        "seq": 3,
        "ts": "2030-01-01T00:00:01.000000Z",
        "type": "user",
        "prev": digest,
        "content": "known type",
        "tone": "calm",
    }
    line2, _ = encode_record(second)
    with open(log_dir / "s.jsonl", "ab") as f:
        f.write(line + line2)
    records = [loc for loc in log.read("s")]
    unknown = records[1].record
    assert isinstance(unknown, UnknownRecord)
    assert unknown.model_extra == {"steps": ["a", {"b": 1.5}], "owner": "x"}
    assert records[2].record.model_extra == {"tone": "calm"}
    assert [loc.raw + b"\n" for loc in records[1:]] == [line, line2]
    assert verify(log).ok
    assert log.append("s", {"type": "user", "content": "after"}).prev == orjson.loads(line2)["hash"]
    assert verify(log).ok


def test_a_valid_record_in_the_wrong_place_is_reported(log: EventLog, log_dir: Path) -> None:
    log.append_many("s", [{"type": "user", "content": f"m{i}"} for i in range(3)])
    path = log_dir / "s.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    duplicated = lines[0] + lines[0] + b"".join(lines[2:])  # seq 1 again where seq 2 belongs
    path.write_bytes(duplicated)
    with pytest.raises(
        CorruptLogError, match="expected session 's' seq 2, found session 's' seq 1"
    ):
        list(EventLog(log_dir).read("s"))
    assert path.read_bytes() == duplicated

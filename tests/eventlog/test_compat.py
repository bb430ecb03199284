"""Logs written by earlier versions (the example workspace's, written before heads, redaction
and the one-pass append path existed) read and verify unchanged, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from eventlog.canonical import expected_line
from eventlog.log import EventLog
from eventlog.verify import verify
from tests.conftest import REPO, snapshot

EXAMPLE_LOGS = REPO / ".airsspec-example" / "contexts" / "agent"


def test_logs_written_by_earlier_versions_verify_and_read_unchanged(tmp_path: Path) -> None:
    logs = tmp_path / "agent"
    shutil.copytree(EXAMPLE_LOGS, logs)
    for head in logs.glob("*.head"):
        head.unlink()  # as they were written: no heads yet
    before = snapshot(logs)
    with EventLog(logs, durability="off") as log:
        report = verify(log)
        assert report.ok and report.records == 379
        assert all(s.warnings for s in report.sessions)  # each says it has no head
        for session in log.sessions():
            for located in log.read(session):
                line, digest = expected_line(orjson.loads(located.raw))
                assert digest == located.record.hash  # the stored bytes re-encode exactly
                assert line == located.raw + b"\n"
    assert snapshot(logs) == before


WRITTEN_V2 = Path(__file__).parent / "fixtures" / "written-v2"


def test_a_log_written_by_this_version_reads_verifies_and_is_rewritten_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The fixture log was written by the schema-2 append path before it was optimised: the
    same input events (ids and times given) must still encode to exactly its bytes, and the
    stored log must still read and verify."""
    import json

    from eventlog.secrets import Redactor

    stored = WRITTEN_V2 / "log"
    with EventLog(stored, durability="off") as log:
        report = verify(log)
        assert report.ok and report.records == 9
        assert [loc.record.seq for loc in log.read("compat")] == list(range(1, 9))
    inputs = json.loads((WRITTEN_V2 / "inputs.json").read_text())
    with EventLog(tmp_path, durability="off", redactor=Redactor()) as log:
        for batch in inputs:
            log.append_many(batch["session"], batch["events"], imported=True)
    rewritten = snapshot(tmp_path)
    assert rewritten == snapshot(stored)
    assert b"[REDACTED:anthropic-api-key:" in rewritten["compat.jsonl"]

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

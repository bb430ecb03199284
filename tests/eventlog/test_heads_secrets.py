"""Heads never lead the log and old logs without one still verify; redaction is complete
(redacting its output finds nothing), changes nothing it does not report, and is recorded."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.errors import InvalidEventError
from eventlog.heads import read_head
from eventlog.log import EventLog
from eventlog.secrets import Redactor
from eventlog.verify import verify

REDACTOR = Redactor({"internal-token": r"itk_[a-z0-9]{32}"})
SHAPES = [
    "AKIAQWERTYUIOPASDFGH",
    "sk-ant-api03-" + "x9Y_" * 22 + "AA",
    "ghp_" + "a1B2" * 9,
    "xoxb-1234567890-0987654321-abcdefghijkl",
    "sk_live_" + "Ab1" * 8,
    "itk_" + "0a" * 16,
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
]


def test_the_head_names_the_last_acknowledged_record(log: EventLog, log_dir: Path) -> None:
    records = log.append_many("s", [{"type": "user", "content": str(i)} for i in range(3)])
    head = read_head(log_dir, "s")
    assert head is not None and (head.seq, head.hash) == (3, records[-1].hash)
    log.append("s", {"type": "user", "content": "more"})
    assert read_head(log_dir, "s").seq == 4


def test_a_log_without_a_head_still_verifies_with_a_warning(log: EventLog, log_dir: Path) -> None:
    log.append("s", {"type": "user", "content": "written before heads existed"})
    (log_dir / "s.head").unlink()
    report = verify(log)
    assert report.ok
    assert report.sessions[0].warnings and "no head file" in report.sessions[0].warnings[0]


@pytest.mark.parametrize("secret", SHAPES)
def test_each_shape_is_redacted_and_recorded(tmp_path: Path, secret: str) -> None:
    with EventLog(tmp_path, durability="off", redactor=REDACTOR) as log:
        record = log.append("s", {"type": "action", "tool": "sh", "params": {"env": f"K={secret}"}})
        assert secret not in record.params["env"]
        assert record.params["env"].startswith("K=[REDACTED:")
        assert [r.path for r in record.redacted] == ["params.env"]
        assert secret.encode() not in (tmp_path / "s.jsonl").read_bytes()
        assert verify(log).ok


@pytest.mark.parametrize(
    "secret",
    [
        "postgres://admin:hunter2@db.example.com/app",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_a_secret_with_no_long_token_is_found_in_a_large_batch(tmp_path: Path, secret: str) -> None:
    """A batch's JSON is gated as a whole; shapes with no run of token characters are let
    through by their literal (``://``, ``PRIVATE KEY``), whatever the batch's size."""
    prose = [{"type": "user", "content": f"Step {i}: run the tests again."} for i in range(200)]
    prose[150] = {"type": "user", "content": f"use {secret} for this"}
    with EventLog(tmp_path, durability="off", redactor=Redactor()) as log:
        records = log.append_many("s", prose)
    assert len(orjson.dumps(prose)) > 4096  # the batch path of the gate, not one record's
    assert [i for i, r in enumerate(records) if r.redacted] == [150]
    assert secret.encode() not in (tmp_path / "s.jsonl").read_bytes()


def test_keep_secrets_stores_the_value_given(tmp_path: Path) -> None:
    with EventLog(tmp_path, durability="off", redactor=REDACTOR) as log:
        record = log.append_many("s", [{"type": "user", "content": SHAPES[0]}], keep_secrets=True)[
            0
        ]
        assert record.content == SHAPES[0] and record.redacted is None


def test_a_caller_cannot_claim_a_redaction(log: EventLog) -> None:
    with pytest.raises(InvalidEventError):
        log.append("s", {"type": "user", "content": "x", "redacted": []})


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=60),
    secret=st.sampled_from([*SHAPES, ""]),
    after=st.text(max_size=60),
)
def test_redaction_is_complete_and_reports_every_change(
    before: str, secret: str, after: str
) -> None:
    text = f"{before} {secret} {after}"
    found: list = []
    out = REDACTOR.redact_text(text, "content", found)
    assert (out == text) == (not found)  # a change is always reported, and only a change
    if secret:
        assert secret not in out
    again: list = []
    assert REDACTOR.redact_text(out, "content", again) == out and not again

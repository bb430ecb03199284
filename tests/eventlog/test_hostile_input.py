"""Input that must be refused, not stored: each hostile shape is either refused with an error
naming where it is, or stored so that every reader can still read it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventlog.canonical import encode_batch
from eventlog.errors import InvalidEventError
from eventlog.exact_json import MAX_DEPTH, InexactJSONError, loads_exact
from eventlog.importers import ImportFailedError, import_paths
from eventlog.jsonl_input import InvalidInputError, parse_event_lines
from eventlog.log import EventLog
from eventlog.schema import SCHEMA_VERSION
from eventlog.verify import verify


def nested(levels: int) -> dict:
    """An object ``levels`` deep (itself counted)."""
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


# --------------------------------------------------------------------------- nesting


def test_an_event_at_the_nesting_limit_is_stored(log: EventLog) -> None:
    (record,) = log.append_many(
        "s", [{"type": "user", "content": "x", "meta": nested(MAX_DEPTH - 1)}]
    )
    assert record.meta == nested(MAX_DEPTH - 1)
    assert verify(log).ok


@pytest.mark.parametrize("levels", [MAX_DEPTH, 200, 400, 3000])
def test_an_event_nested_past_the_limit_is_refused_by_the_python_api(
    log: EventLog, log_dir: Path, levels: int
) -> None:
    with pytest.raises(InvalidEventError) as caught:
        log.append_many(
            "s",
            [
                {"type": "user", "content": "ok"},
                {"type": "user", "content": "x", "meta": nested(levels)},
            ],
        )
    assert caught.value.index == 1 and caught.value.field == "meta"
    assert f"more than {MAX_DEPTH} levels" in str(caught.value)
    assert not (log_dir / "s.jsonl").exists()


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 300, 3000])
def test_a_jsonl_line_nested_past_the_limit_is_refused_naming_its_line(levels: int) -> None:
    data = (
        b'{"type": "user", "content": "fine"}\n'
        + json.dumps({"type": "user", "content": "x", "params": nested(levels)}).encode()
        if levels < 900
        else b'{"type": "user", "content": "fine"}\n'
        + b'{"type": "user", "content": "x", "meta": '
        + b'{"a": ' * levels
        + b"1"
        + b"}" * levels
        + b"}\n"
    )
    with pytest.raises(InvalidInputError) as caught:
        parse_event_lines(data, "in.jsonl")
    assert caught.value.errors[0].line == 2
    assert f"more than {MAX_DEPTH} levels deep" in caught.value.lines()[0]


def test_loads_exact_refuses_past_the_limit() -> None:
    assert loads_exact(json.dumps(nested(MAX_DEPTH))) == nested(MAX_DEPTH)
    with pytest.raises(InexactJSONError, match="levels deep"):
        loads_exact(json.dumps(nested(MAX_DEPTH + 1)))


def test_an_import_nested_past_the_limit_is_refused_naming_file_and_line(
    log: EventLog, log_dir: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "deep.jsonl"
    lines = [
        {
            "type": "user",
            "message": {"role": "user", "content": "hi"},
            "timestamp": "2026-01-01T00:00:00Z",
        },
        {
            "type": "assistant",
            "message": {
                "content": [{"type": "tool_use", "id": "t", "name": "x", "input": nested(250)}]
            },
            "timestamp": "2026-01-01T00:00:01Z",
        },
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ImportFailedError) as caught:
        import_paths(log, "claude-code", [transcript])
    assert caught.value.errors[0].line == 2
    assert "levels deep" in str(caught.value.errors[0])
    assert not (log_dir / "deep.jsonl").exists()


def write_deep_record(log_dir: Path, session: str, levels: int) -> None:
    """A log holding a record nested ``levels`` deep, as appends stored it before the limit."""
    bodies = [
        {"type": "user", "content": "deep", "meta": nested(levels)},
        {"type": "user", "content": "after"},
    ]
    _, data, _ = encode_batch(
        bodies, SCHEMA_VERSION, session, 0, "2026-01-01T00:00:00.000000Z", ["i1", "i2"], None
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / f"{session}.jsonl").write_bytes(data)


def test_a_deep_record_stored_before_the_limit_stays_readable_and_verifiable(
    log: EventLog, log_dir: Path
) -> None:
    write_deep_record(log_dir, "old", 240)
    records = [loc.record for loc in log.read("old")]
    assert [r.content for r in records] == ["deep", "after"]
    assert records[0].meta == nested(240)
    report = verify(log)
    assert report.ok and report.records == 2
    assert any("levels deep" in w for w in report.sessions[0].warnings)

"""Input that must be refused, not stored: each hostile shape is either refused with an error
naming where it is, or stored so that every reader can still read it back."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import eventlog.exact_json
from eventlog.canonical import encode_batch
from eventlog.errors import (
    ImportFailedError,
    InexactJSONError,
    InvalidEventError,
    InvalidInputError,
)
from eventlog.exact_json import MAX_DEPTH, json_shape_py, loads_exact
from eventlog.ids import format_ts, normalize_ts, parse_ts
from eventlog.importers import ImportOptions, export_session, import_paths
from eventlog.jsonl_input import parse_event_lines
from eventlog.log import EventLog
from eventlog.native import lines
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


NATIVE_SHAPE = getattr(lines, "json_shape", None)


@pytest.fixture(params=["c", "python"])
def scan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a batch's JSON is scanned: the extension's pass, and without it (two counts
    of openers, then Python's passes)."""
    if request.param == "c" and NATIVE_SHAPE is None:
        pytest.skip("the C extension is not built here")
    if request.param == "python":
        monkeypatch.setattr(eventlog.exact_json, "_native_shape", None)
        monkeypatch.setattr(eventlog.exact_json, "json_shape", json_shape_py)
    return request.param


@pytest.mark.parametrize(
    "decoy",
    ["]}" * 400, '\\"]}' * 200, "\\" * 300 + "]" * 300],
    ids=["closing-brackets", "escaped-quotes", "backslash-runs"],
)
def test_a_body_past_the_limit_is_refused_whatever_brackets_its_batch_strings_hold(
    scan: str, log: EventLog, log_dir: Path, decoy: str
) -> None:
    """A body one level past the limit, with few brackets of its own, beside strings full of
    closing brackets and escapes that a scan counting them (or losing track of where a
    string ends) would take as levels closed: refused, naming the body and field."""
    with pytest.raises(InvalidEventError) as caught:
        log.append_many(
            "s",
            [
                {"type": "user", "content": decoy},
                {"type": "user", "content": decoy, "meta": nested(MAX_DEPTH)},
            ],
        )
    assert (caught.value.index, caught.value.field) == (1, "meta")
    assert not (log_dir / "s.jsonl").exists()


@pytest.mark.parametrize(
    "decoy", ["{[" * 3000, '\\"{[' * 1000, "null {" * 500], ids=["openers", "escaped", "null"]
)
def test_shallow_bodies_with_many_brackets_in_their_strings_are_stored(
    scan: str, log: EventLog, decoy: str
) -> None:
    """Strings full of openers (more than the limit, so the cheap count leaves doubt) nest
    nothing: the batch is stored as given."""
    batch = [{"type": "user", "content": decoy, "meta": {"a": {"b": [decoy]}}}] * 3
    stored = log.append_many("s", batch)
    assert [(r.content, r.meta) for r in stored] == [(decoy, {"a": {"b": [decoy]}})] * 3


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


# --------------------------------------------------------------------------- secrets

GITHUB = "ghp_" + "Zq8Lm2Rt5Vw9Xy3Bn6Cd1Fg4Hj7Kp0Ts2Uv5"
GITLAB = "glpat-" + "x8Kq2Lm5Np9Rs3Tv6Wy1Z"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ORDINARY = [
    "Run the tests again, then commit: the fix makes replay deterministic.",
    "commit 3038a64f0b2c9e1d7a5b4c3d2e1f0a9b8c7d6e5f (HEAD -> main)",
    "3038a64f0b2c9e1d7a5b4c3d2e1f0a9b8c7d6e5f",
    "session 0b7c1d2e-3f4a-4b5c-8d6e-7f8091a2b3c4 started",
    "see src/airsspec/cli/history/CommandLine1234 and usr/lib/python3/dist-packages/Foo/Bar123",
    "class AbstractSingletonProxyFactoryBean2Helper: ThisIsAVeryLongCamelCaseIdentifierName12",
    "https://github.com/HypothesisWorks/hypothesis/pull/3068 was merged",
    "def test_a_deep_record_stored_before_the_limit_stays_readable_and_verifiable():",
    "The quick brown fox jumps over the lazy dog " * 5,
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
]


def redacted_store(tmp_path: Path, content: str) -> tuple[object, bytes]:
    from eventlog.secrets import Redactor

    with EventLog(tmp_path, durability="off", redactor=Redactor()) as log:
        record = log.append("s", {"type": "user", "content": content})
    return record, (tmp_path / "s.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("secret", "body"),
    [(GITHUB, GITHUB[4:]), (GITLAB, GITLAB[6:]), (JWT, JWT.rsplit(".", 1)[1])],
)
def test_the_whole_token_is_redacted_not_only_its_prefix(
    tmp_path: Path, secret: str, body: str
) -> None:
    import hashlib

    record, stored = redacted_store(tmp_path, f"token {secret} end")
    assert body.encode() not in stored
    digest = hashlib.sha256(secret.encode()).hexdigest()[:8]
    assert record.redacted[0].sha256 == digest
    assert record.content.startswith("token [REDACTED:") and record.content.endswith(
        f":{digest}] end"
    )


def test_two_tokens_of_one_kind_have_different_markers(tmp_path: Path) -> None:
    other = "ghp_" + "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2"
    record, _ = redacted_store(tmp_path, f"{GITHUB} and {other}")
    first, second = (r.sha256 for r in record.redacted)
    assert first != second


def test_an_aws_secret_key_alone_is_redacted(tmp_path: Path) -> None:
    record, stored = redacted_store(tmp_path, f"export SECRET={AWS_SECRET}")
    assert AWS_SECRET.encode() not in stored
    assert [r.kind for r in record.redacted] == ["aws-secret-access-key"]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_stored_as_given(tmp_path: Path, text: str) -> None:
    record, _ = redacted_store(tmp_path, text)
    assert record.content == text and record.redacted is None


@pytest.mark.parametrize("session", [GITHUB, GITLAB, "AKIAQWERTYUIOPASDFGH"])
def test_a_session_id_shaped_like_a_secret_is_refused(tmp_path: Path, session: str) -> None:
    from eventlog.errors import InvalidSessionIdError
    from eventlog.secrets import Redactor

    with (
        EventLog(tmp_path, durability="off", redactor=Redactor()) as log,
        pytest.raises(InvalidSessionIdError, match="looks like a secret") as caught,
    ):
        log.append(session, {"type": "user", "content": "x"})
    assert session not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_source_documents_are_redacted_before_indexing_and_keep_their_lines() -> None:
    from eventlog.schema import SourceIndexedRecord
    from projections.units import source_units

    event = SourceIndexedRecord(
        v=2,
        id="e",
        session="airsspec.memory",
        seq=1,
        ts="2026-01-01T00:00:00.000000Z",
        type="source_indexed",
        prev=None,
        hash="h",
        path="notes.md",
        size=1,
        sha256="0" * 64,
    )
    text = f"# Keys\n\nuse {GITHUB}\n\n# Later\n\nplain words\n"
    units = source_units(event, text)
    assert all(GITHUB[4:] not in u.text for u in units)
    assert "[REDACTED:github-token:" in units[0].text
    assert [(u.line_from, u.line_to) for u in units] == [(1, 4), (5, 7)]


# --------------------------------------------------------------------------- timestamps


@settings(deadline=None)  # a loaded machine must not fail a pure function
@given(moment=st.datetimes(timezones=st.just(UTC)))
@example(moment=datetime(999, 1, 1, tzinfo=UTC))
@example(moment=datetime(1, 1, 1, tzinfo=UTC))
def test_timestamps_always_have_four_digit_years_and_sort_as_times(moment: datetime) -> None:
    text = format_ts(moment)
    assert len(text) == 27 and text[4] == "-"
    assert normalize_ts(text) == text
    assert parse_ts(text) == moment
    later = format_ts(moment + timedelta(microseconds=1)) if moment.year < 9999 else text
    assert later >= text


@settings(deadline=None)
@given(first=st.datetimes(), second=st.datetimes())
def test_timestamp_strings_compare_as_the_times(first: datetime, second: datetime) -> None:
    a, b = format_ts(first.replace(tzinfo=UTC)), format_ts(second.replace(tzinfo=UTC))
    assert (a < b) == (first < second)


def test_an_early_year_is_stored_padded_and_queryable(log: EventLog) -> None:
    record = log.append("s", {"type": "user", "content": "x", "ts": "0999-01-01T00:00:00Z"})
    assert record.ts == "0999-01-01T00:00:00.000000Z"
    assert [loc.record.ts for loc in log.read("s")] == [record.ts]


@pytest.mark.parametrize("ts", ["0000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00"])
def test_a_time_outside_years_1_to_9999_is_refused_naming_the_field(
    log: EventLog, log_dir: Path, ts: str
) -> None:
    with pytest.raises(InvalidEventError) as caught:
        log.append("s", {"type": "user", "content": "x", "ts": ts})
    assert caught.value.field == "ts" and ts in str(caught.value)
    assert not (log_dir / "s.jsonl").exists()


# --------------------------------------------------------------------------- line separators

SEPARATORS = "a\u2028b\u2029c\x85d"


def test_a_transcript_with_unicode_line_separators_in_strings_imports_exactly(
    log: EventLog, tmp_path: Path
) -> None:
    from eventlog.importers import export_session

    lines = [
        {
            "type": "user",
            "message": {"role": "user", "content": SEPARATORS},
            "timestamp": "2026-01-01T00:00:00Z",
        },
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": "ok"}]},
            "timestamp": "2026-01-01T00:00:01Z",
        },
    ]
    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
    transcript = tmp_path / "sep.jsonl"
    transcript.write_bytes(data)
    (result,) = import_paths(log, "claude-code", [transcript], ImportOptions(keep_secrets=True))
    assert result.appended == 2
    assert [loc.record.content for loc in log.read("sep")] == [SEPARATORS, "ok"]
    assert export_session(log, "claude-code", "sep") == data


def test_jsonl_input_splits_on_newlines_only() -> None:
    data = (
        json.dumps({"type": "user", "content": SEPARATORS}, ensure_ascii=False).encode()
        + b"\r\n"
        + json.dumps({"type": "user", "content": "second"}).encode()
        + b"\n"
    )
    events = parse_event_lines(data, "in.jsonl")
    assert [e["content"] for e in events] == [SEPARATORS, "second"]  # plain: kept as dicts


# --------------------------------------------------------------------------- import identity


def transcript_lines(*texts: str) -> bytes:
    return "".join(
        json.dumps(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "timestamp": f"2026-01-01T00:00:0{i}Z",
            }
        )
        + "\n"
        for i, text in enumerate(texts)
    ).encode()


def test_a_file_named_twice_in_one_import_is_read_once(log: EventLog, tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    transcript = folder / "twice.jsonl"
    transcript.write_bytes(transcript_lines("one", "two"))
    (tmp_path / "link.jsonl").symlink_to(transcript)
    paths = [
        transcript,
        transcript,
        folder,
        tmp_path / "projects" / ".." / "projects" / "twice.jsonl",
    ]
    (result,) = import_paths(log, "claude-code", paths)
    assert result.appended == 2
    assert [loc.record.content for loc in log.read("twice")] == ["one", "two"]


ORIGIN = {
    "format": "claude-code",
    "source": "x.jsonl",
    "index": 1,
    "sha256": "0" * 64,
    "text": "{}",
}


@pytest.mark.parametrize("as_model", [False, True])
def test_a_hand_written_origin_is_refused_on_append(
    log: EventLog, log_dir: Path, as_model: bool
) -> None:
    from eventlog.schema import UserEvent

    event = {"type": "user", "content": "forged", "origin": ORIGIN}
    given = UserEvent.model_validate(event) if as_model else event
    with pytest.raises(InvalidEventError) as caught:
        log.append_many("s", [{"type": "user", "content": "fine"}, given])
    assert (caught.value.index, caught.value.field) == (1, "origin")
    with pytest.raises(InvalidInputError) as lines:
        parse_event_lines(json.dumps(event).encode() + b"\n", "in.jsonl")
    assert lines.value.errors[0].field == "origin"
    assert not (log_dir / "s.jsonl").exists()


def test_import_skips_the_records_it_holds_by_position_not_by_count(
    log: EventLog, tmp_path: Path
) -> None:
    import hashlib

    data = transcript_lines("zero", "one", "two")
    transcript = tmp_path / "held.jsonl"
    transcript.write_bytes(data)
    second = data.split(b"\n")[1] + b"\n"
    # a log written before origin was refused: it holds record 1 only
    held = {**ORIGIN, "source": "held.jsonl", "sha256": hashlib.sha256(second).hexdigest()}
    log.append_many("held", [{"type": "user", "content": "one", "origin": held}], imported=True)
    (result,) = import_paths(log, "claude-code", [transcript])
    assert (result.appended, result.already_imported) == (2, 1)
    assert sorted(loc.record.content for loc in log.read("held")) == ["one", "two", "zero"]
    (again,) = import_paths(log, "claude-code", [transcript])
    assert (again.appended, again.already_imported) == (0, 3)


@pytest.mark.parametrize("levels", [300, 1000, 1020])
def test_a_document_deeper_than_the_encoder_goes_is_read_or_refused_never_a_crash(
    levels: int,
) -> None:
    """A document whose records are checked one by one (``max_depth=None``) may nest deeper
    than orjson encodes (255 levels): it is still read, and a key given twice in it, however
    deep, is still refused naming the key."""
    deep = '{"a":' * levels + "1" + "}" * levels
    value = loads_exact(deep, max_depth=None)
    for _ in range(levels):
        value = value["a"]
    assert value == 1
    twice = '{"a":' * levels + '{"x":1,"x":2}' + "}" * levels
    with pytest.raises(InexactJSONError, match="'x' is given twice"):
        loads_exact(twice, max_depth=None)


@pytest.mark.parametrize("name", ["s1.jsonl", "s1.head"])
def test_a_fifo_planted_where_a_log_is_read_is_refused_not_waited_on(
    tmp_path: Path, name: str
) -> None:
    """A FIFO at a session's log or head held ``open`` until someone wrote to it (every read
    of the session hung): it is refused as any file that is not a regular one is, at once.
    Run in a child process, killed (and the test failed) if it waits."""
    import subprocess
    import sys

    from eventlog.log import EventLog

    log = EventLog(tmp_path)
    log.append("s1", {"type": "user", "content": "hello"})
    log.close()
    (tmp_path / name).unlink()
    os.mkfifo(tmp_path / name)
    script = (
        "import sys\nfrom eventlog.layout import read_nofollow\n"
        "from eventlog.errors import UnsafePathError\n"
        "try:\n    read_nofollow(sys.argv[1])\nexcept UnsafePathError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stdout


# --------------------------------------------------------------------------- importer shapes

LOCOMO_DATE = "1:56 pm on 8 May, 2023"


def locomo(*turns: dict, date: str = LOCOMO_DATE, sample_id: object = "s") -> str:
    conversation = {"session_1": list(turns), "session_1_date_time": date}
    return json.dumps([{"sample_id": sample_id, "conversation": conversation}])


# A record whose fields have types its tool never writes: each is imported (what is not mapped
# kept as it is, links left out) or refused naming file, line and field; never a crash.
ODD_SHAPES = [
    # claude-code: a message's text that is no text is refused, as an assistant's is
    (
        "claude-code",
        {"type": "user", "message": {"content": [{"type": "text", "text": 5}]}},
        r"t\.jsonl:1: field 'content': Input should be a valid string",
    ),
    # tool ids that are not strings link nothing
    (
        "claude-code",
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": ["t"]}]}},
        None,
    ),
    (
        "claude-code",
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": {"a": 1}}]}},
        None,
    ),
    (
        "claude-code",
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": [1]}]}},
        None,
    ),
    (
        "claude-code",
        {
            "type": "user",
            "message": {"content": [{"type": "tool_result", "content": [{"text": 5}]}]},
        },
        None,
    ),
    # "false" is not false: stored as true it would say the call failed
    (
        "claude-code",
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "false"}]
            },
        },
        r"t\.jsonl:1: field 'is_error': Input should be a valid boolean",
    ),
    ("openhands", [{"id": [1], "action": "run", "args": {}}], None),
    ("openhands", [{"id": {"a": 1}, "action": "run", "args": {}}], None),
    ("openhands", [{"id": 1, "observation": "run", "cause": [1]}], None),
    ("openhands", [{"id": 1, "action": "message", "args": [1], "message": "hi"}], None),
    ("openhands", [{"id": 1, "action": "message", "args": "x", "message": "hi"}], None),
    (
        "openhands",
        [
            {"id": 1, "action": "run", "args": {}},
            {"id": 2, "observation": "run", "cause": 1, "content": "ok", "extras": [1]},
        ],
        None,
    ),
    # a dict is no message text: it is refused, not stored as Python's repr of it
    (
        "openhands",
        [{"id": 1, "action": "message", "source": "user", "args": {"content": {"a": 1}}}],
        r"t\.json:1: field 'content': Input should be a valid string",
    ),
    # a time with a negative UTC offset is a time
    (
        "openhands",
        [
            {
                "id": 1,
                "action": "message",
                "source": "user",
                "args": {"content": "hi"},
                "timestamp": "2024-01-01T00:00:00-05:00",
            }
        ],
        None,
    ),
    ("locomo", locomo({"speaker": "A", "text": 5}), r"session_1 turn 1: 'text' is not text"),
    (
        "locomo",
        locomo({"speaker": "A", "text": "x", "blip_caption": 5}),
        r"session_1 turn 1: 'blip_caption' is not text",
    ),
    ("locomo", locomo({"speaker": {"a": 1}, "text": "x"}), r"turn 1: 'speaker' is not text"),
    ("locomo", locomo({"speaker": "A", "text": "x"}, sample_id={"x": 1}), r"sample 0: sample_id"),
    (
        "locomo",
        locomo(*[{"speaker": "A", "text": "x"}] * 3, date="11:59 pm on 31 December, 9999"),
        r"session_1: its turns would be dated after the year 9999",
    ),
]


@pytest.mark.parametrize(
    ("fmt", "record", "refused"),
    ODD_SHAPES,
    ids=[f"{fmt}-{n}" for n, (fmt, _, _) in enumerate(ODD_SHAPES)],
)
def test_a_record_of_an_odd_shape_is_imported_or_refused_never_a_crash(
    log: EventLog, tmp_path: Path, fmt: str, record: object, refused: str | None
) -> None:
    if fmt == "claude-code":
        source, text = tmp_path / "t.jsonl", json.dumps(record) + "\n"
    else:
        source, text = (
            tmp_path / "t.json",
            record if isinstance(record, str) else json.dumps(record),
        )
    source.write_text(text)
    if refused is not None:
        with pytest.raises(ImportFailedError, match=refused):
            import_paths(log, fmt, [source])
        assert log.sessions() == []
        return
    (result,) = import_paths(log, fmt, [source], ImportOptions(keep_secrets=True))
    assert result.appended == (len(record) if isinstance(record, list) else 1)
    assert export_session(log, fmt, result.session) == source.read_bytes()
    assert verify(log).ok

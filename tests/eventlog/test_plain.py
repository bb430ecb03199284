"""Stored records read as plain dicts (``eventlog.plain``) against the models, which decide.

For stored lines of every message type, valid and then with one field set to a hostile JSON
value or an extra key added: whenever the plain check accepts a line, the models accept it too
and a replay shows it the same (text, header, stored line). The check never accepts what the
models refuse. A session read with ``plain`` gives the same replay as one read as models, the
types outside ``PLAIN_TEXT`` included, and a corrupt line is refused the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from eventlog.errors import CorruptLogError
from eventlog.log import EventLog
from eventlog.plain import stored_record
from eventlog.render import PLAIN_TEXT, format_record, replay_lines
from eventlog.schema import validation

ORIGIN = {"format": "f", "source": "a.jsonl", "index": 3, "sha256": "ab", "text": "{}"}
VALID: list[dict[str, Any]] = [
    {"type": "user", "content": "hello\nthere"},
    {"type": "assistant", "content": "ok", "meta": {"k": [1, 2]}},
    {"type": "thought", "content": ""},
    {"type": "action", "tool": "grep", "params": {"q": "x"}},
    {"type": "action", "tool": "ls"},
    {"type": "observation", "result": {"n": 1}, "action_id": "a1", "is_error": True},
    {"type": "observation", "result": "plain"},
    {"type": "imported", "kind": "x:compact_boundary", "text": "t", "origin": ORIGIN},
    {"type": "imported", "kind": "k"},
]
ENVELOPE = {"v": 2, "id": "e1", "session": "s", "seq": 4, "ts": "2026-01-01T00:00:00Z"}
ENVELOPE |= {"prev": "0" * 64, "hash": "f" * 64}

JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-2, 2),
        st.sampled_from([0.0, 1.5, 2**70, 2**64 - 1]),
        st.text(max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)
BODY_KEYS = ["content", "tool", "params", "result", "action_id", "is_error", "kind", "text"]
KEYS = st.sampled_from([*ENVELOPE, "meta", "origin", "batch", "redacted", *BODY_KEYS, "extra"])


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()  # any int, as a line may hold


def _same_shown(line: bytes) -> None:
    """The plain check accepts ``line`` only where the models do, and shows it the same."""
    try:
        plain = stored_record(line)
    except ValueError:  # JSON orjson refuses: the reader hands it to the models
        plain = None
    try:
        model = validation.parse_record(line)
    except (ValidationError, ValueError):
        assert plain is None, line
        return
    if plain is None or plain["type"] not in PLAIN_TEXT:
        return
    assert format_record(plain, full_meta=True) == format_record(model, full_meta=True)
    assert format_record(plain) == format_record(model)
    for field in ("id", "session", "seq", "ts", "prev", "batch", "meta", "action_id"):
        assert getattr(plain, field) == getattr(model, field, None), field


@pytest.mark.parametrize("body", VALID, ids=lambda b: b["type"])
def test_every_valid_message_reads_plainly_and_shows_as_its_model(body: dict[str, Any]) -> None:
    line = _line(ENVELOPE | body)
    assert stored_record(line) is not None
    _same_shown(line)


@given(st.sampled_from(VALID), KEYS, JSON)
def test_a_hostile_field_is_read_plainly_only_where_the_models_agree(
    body: dict[str, Any], key: str, value: Any
) -> None:
    _same_shown(_line(ENVELOPE | body | {key: value}))


def test_a_session_read_plainly_replays_as_its_models(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append_many("s", VALID[:3], keep_secrets=True)
    log.append_many("s", VALID[3:], imported=True)  # a batch, origins
    log.append_many("s", [{"type": "phase_changed", "phase": "build"}], system=True)  # no text
    pairs = [(x.record, x.raw) for x in log.read("s")]
    plain = [(x.record, x.raw) for x in log.read("s", plain=True)]
    assert all(isinstance(r, dict) for r, _ in plain)
    assert [r.batch for r, _ in plain] == [r.batch for r, _ in pairs]
    for stored in (False, True):
        for full_meta in (False, True):
            shown = list(replay_lines(plain, 2, stored=stored, full_meta=full_meta))
            assert shown == list(replay_lines(pairs, 2, stored=stored, full_meta=full_meta))
    log.close()


def test_a_corrupt_line_is_refused_when_read_plainly(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append_many("s", [{"type": "user", "content": "a"}])
    log.close()
    path = next(tmp_path.rglob("*.jsonl"))
    path.write_bytes(path.read_bytes().replace(b'"seq":1', b'"seq":"x"'))
    with pytest.raises(CorruptLogError):
        list(EventLog(tmp_path).read("s", plain=True))

"""Append and read: round trip, chain, atomic batches, resumable reads, session ids."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.errors import InvalidEventError, InvalidSessionIdError
from eventlog.layout import validate_session_id
from eventlog.log import EventLog
from eventlog.schema import ActionEvent, ObservationRecord, UserEvent, UserRecord
from eventlog.verify import verify

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

events = st.one_of(
    st.builds(
        lambda c, m: {"type": "user", "content": c, "meta": m},
        st.text(),
        st.none() | st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    ),
    st.builds(lambda c: {"type": "thought", "content": c}, st.text(min_size=0, max_size=2000)),
    st.builds(
        lambda t, p: {"type": "action", "tool": t, "params": p},
        st.text(min_size=1, max_size=20),
        st.dictionaries(st.text(max_size=8), json_values),
    ),
    st.builds(
        lambda r, e: {"type": "observation", "result": r, "is_error": e}, json_values, st.booleans()
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(st.lists(events, min_size=1, max_size=5), min_size=1, max_size=6))
def test_append_read_round_trip(tmp_path_factory: pytest.TempPathFactory, batches) -> None:
    log_dir = tmp_path_factory.mktemp("rt")
    with EventLog(log_dir, durability="off") as log:
        stored = []
        for batch in batches:
            stored.extend(log.append_many("s", batch))
        read = [loc.record for loc in log.read("s")]
        assert read == stored
        assert [r.seq for r in read] == list(range(1, len(read) + 1))
        expected = [e for batch in batches for e in batch]
        for event, record in zip(expected, read, strict=True):
            for key, value in event.items():
                if value is not None:
                    assert getattr(record, key) == value
        assert read[0].prev is None
        assert all(b.prev == a.hash for a, b in itertools.pairwise(read))
        assert verify(log).ok


def test_large_unicode_payload_round_trips(log: EventLog) -> None:
    content = ("日本語 emoji 🚀 \u2028 zero\x00width " * 200_000)[:5_000_000]
    record = log.append("big", UserEvent(content=content, meta={"note": "ü" * 10_000}))
    (read,) = [loc.record for loc in log.read("big")]
    assert read == record and read.content == content
    assert verify(log).ok


def test_typed_events_and_links(log: EventLog) -> None:
    action = log.append("s", ActionEvent(tool="bash", params={"cmd": "pytest -q"}))
    obs = log.append(
        "s", {"type": "observation", "result": "1 failed", "action_id": action.id, "is_error": True}
    )
    assert isinstance(obs, ObservationRecord) and obs.action_id == action.id and obs.is_error
    assert obs.prev == action.hash and obs.seq == 2


def test_ids_are_unique_and_time_ordered(log: EventLog) -> None:
    records = log.append_many("s", [{"type": "user", "content": str(i)} for i in range(2000)])
    ids = [r.id for r in records]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_given_ts_is_normalised_to_utc(log: EventLog) -> None:
    record = log.append("s", {"type": "user", "content": "x", "ts": "2024-05-01T12:00:00+02:00"})
    assert record.ts == "2024-05-01T10:00:00.000000Z"


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "user"},
        {"type": "user", "content": "x", "colour": "red"},
        {"type": "teleport", "content": "x"},
        {"content": "x"},
        {"type": "user", "content": "x", "ts": "last tuesday"},
        {"type": "user", "content": "x", "meta": {"n": float("nan")}},
        {"type": "user", "content": "x", "meta": {"n": 2**70}},
        {"type": "action", "tool": "", "params": {}},
    ],
)
def test_invalid_batch_appends_nothing(log: EventLog, log_dir: Path, bad: dict) -> None:
    log.append("s", {"type": "user", "content": "before"})
    before = (log_dir / "s.jsonl").read_bytes()
    with pytest.raises(InvalidEventError) as info:
        log.append_many("s", [{"type": "user", "content": "ok"}, bad])
    assert info.value.index == 1
    assert (log_dir / "s.jsonl").read_bytes() == before
    assert log.append("s", {"type": "user", "content": "after"}).seq == 2


def test_read_resumes_from_offset(log: EventLog) -> None:
    log.append_many("s", [{"type": "user", "content": f"m{i}"} for i in range(50)])
    full = list(log.read("s"))
    mid = full[19]
    resumed = list(log.read("s", offset=mid.end, offset_seq=mid.record.seq + 1))
    assert [loc.record for loc in resumed] == [loc.record for loc in full[20:]]
    assert [loc.record.seq for loc in log.read("s", from_seq=45)] == [45, 46, 47, 48, 49, 50]
    raw = (log.log_dir / "s.jsonl").read_bytes()
    assert all(raw[loc.offset : loc.end] == loc.raw + b"\n" for loc in full)


def test_appends_from_two_log_instances_share_one_chain(log_dir: Path) -> None:
    with EventLog(log_dir) as a, EventLog(log_dir) as b:
        for i in range(20):
            (a if i % 2 else b).append("s", {"type": "user", "content": str(i)})
        assert verify(a).ok
        assert [loc.record.content for loc in a.read("s")] == [str(i) for i in range(20)]


def test_an_append_after_a_seq_lands_only_on_that_record(log_dir: Path) -> None:
    """``after``: the batch is written only if the session's last record is that seq (0: it
    has none), checked under the session's lock; else ``SessionMovedError`` names both seqs
    and nothing is written, not even a file for a session that has none."""
    from eventlog.errors import SessionMovedError

    with EventLog(log_dir) as a, EventLog(log_dir) as b:
        with pytest.raises(SessionMovedError, match="after seq 2, but its last record is seq 0"):
            a.append("s", {"type": "user", "content": "x"}, after=2)
        assert not (log_dir / "s.jsonl").exists()
        assert a.append("s", {"type": "user", "content": "first"}, after=0).seq == 1
        assert b.append("s", {"type": "user", "content": "b read 1"}, after=1).seq == 2
        before = (log_dir / "s.jsonl").read_bytes()
        for stale in (0, 1, 3):
            with pytest.raises(SessionMovedError, match=f"after seq {stale}, but its last .* 2;"):
                a.append_many("s", [{"type": "user", "content": "a read stale"}], after=stale)
        assert (log_dir / "s.jsonl").read_bytes() == before
        assert a.append("s", {"type": "user", "content": "a read 2"}, after=2).seq == 3
        assert verify(a).ok


@pytest.mark.parametrize("after", [True, False, -1, 1.0, "1"])
def test_an_after_that_is_not_a_seq_is_refused_and_nothing_written(
    log_dir: Path, after: Any
) -> None:
    """``after`` is a seq: a whole number, 0 or more. A bool (an int to Python: ``True``
    would land after seq 1), a float, text (never equal to a seq: refused as moved forever,
    however often the caller read again) or a negative number is bad input, said as such, in
    a session that has records and in one that has none."""
    from eventlog.errors import InvalidBoundError

    with EventLog(log_dir) as log:
        log.append("s", {"type": "user", "content": "first"})
        before = (log_dir / "s.jsonl").read_bytes()
        for session in ("s", "t"):
            with pytest.raises(InvalidBoundError, match=r"after: .* is not a seq"):
                log.append(session, {"type": "user", "content": "x"}, after=after)
            with pytest.raises(InvalidBoundError, match=r"after: .* is not a seq"):
                log.append_many(session, [{"type": "user", "content": "x"}], after=after)
    assert (log_dir / "s.jsonl").read_bytes() == before
    assert not (log_dir / "t.jsonl").exists()


def test_a_batch_refused_for_its_after_leaves_no_owner_behind(log_dir: Path) -> None:
    """A refused batch naming an owner (``session_started``, sealed per user) is unlearned as
    a refused creation is: the session's real first owner seals its records, so forgetting
    that owner shreds them (they were sealed under the refused batch's user)."""
    from eventlog.crypto import FileKeyStore, Sealer, key_id, nested_kid
    from eventlog.errors import SessionMovedError
    from eventlog.owners import SessionOwners

    keys = FileKeyStore(log_dir.parent / "keys")
    sealer = Sealer("user", keys, SessionOwners(log_dir))
    mallory = [{"type": "session_started", "user": "mallory"}]
    with EventLog(log_dir, sealer=sealer) as log:
        with pytest.raises(SessionMovedError):  # made after a record the session has not
            log.append_many("s", mallory, system=True, after=3)
        log.append_many("s", [{"type": "session_started", "user": "ana"}], system=True)
        log.append("s", {"type": "user", "content": "ana's words"})
        log.append("t", {"type": "user", "content": "no one's words"})
        with pytest.raises(SessionMovedError):  # made after none, and it has one
            log.append_many("t", mallory, system=True, after=0)
        log.append("t", {"type": "user", "content": "still no one's"})
    kids = {
        session: [
            json.loads(line)["sealed"]["kid"]
            for line in (log_dir / f"{session}.jsonl").read_bytes().splitlines()
            if b'"sealed"' in line
        ]
        for session in ("s", "t")
    }
    ana = nested_kid(key_id("user:ana"), key_id("session:s"))
    assert kids == {"s": [ana], "t": [key_id("session:t")] * 2}


def test_of_two_writers_appending_after_the_same_record_one_lands(log_dir: Path) -> None:
    """Two logs in two threads read the same head, then both append after it (a barrier
    between): each round exactly one lands, right after the record both read, and the other
    is told and writes nothing."""
    import threading

    from eventlog.errors import SessionMovedError

    rounds = 30
    barrier = threading.Barrier(2)
    outcomes: list[tuple[int, str, int | None]] = []  # (round, writer, seq written or None)

    def write(name: str) -> None:
        with EventLog(log_dir) as log:
            for turn in range(rounds):
                read = log.head("s").seq if log.has("s") else 0
                barrier.wait()  # both have read the same head
                try:
                    seq = log.append("s", {"type": "user", "content": name}, after=read).seq
                    outcomes.append((turn, name, seq if seq == read + 1 else -seq))
                except SessionMovedError:
                    outcomes.append((turn, name, None))
                barrier.wait()  # both have tried

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for turn in range(rounds):
        seqs = sorted((s for t, _, s in outcomes if t == turn), key=lambda s: s is None)
        assert seqs == [turn + 1, None], turn
    with EventLog(log_dir) as log:
        assert verify(log).ok and len(list(log.read("s"))) == rounds


@pytest.mark.parametrize(
    "session",
    [
        "../escape",
        "a/b",
        "a\\b",
        "",
        ".hidden",
        "-flag",
        "con",
        "NUL.txt",
        "lpt1",
        "trailing.",
        "x" * 129,
        "a\x00b",
        "tab\tname",
        "space name",
        "é",
    ],
)
def test_unsafe_session_ids_are_rejected(log: EventLog, session: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_id(session)
    with pytest.raises(InvalidSessionIdError):
        log.append(session, {"type": "user", "content": "x"})
    assert not log.log_dir.exists() or not any(log.log_dir.parent.rglob("*.jsonl"))


@pytest.mark.parametrize("session", ["s1", "spec-auth_login.v2", "A" * 128, "2026-11-21"])
def test_portable_session_ids_are_accepted(session: str) -> None:
    assert validate_session_id(session) == session


def test_stored_line_is_canonical_json_with_hash_last(log: EventLog) -> None:
    log.append("s", {"type": "user", "content": "é", "meta": {"b": 1, "a": 2}})
    line = (log.log_dir / "s.jsonl").read_bytes()
    assert line.endswith(b'"}\n') and b'"hash":' in line[-80:]
    parsed = json.loads(line)
    assert list(parsed)[:-1] == sorted(parsed)[: len(parsed) - 1] or list(parsed)[-1] == "hash"
    assert "é".encode() in line  # UTF-8, not \\u escapes
    assert isinstance(next(iter(log.read("s"))).record, UserRecord)


ABSENT = object()  # a field left out, not given as None
origins = (
    st.just(ABSENT)
    | st.none()
    | st.builds(
        lambda t, i, s: {
            "format": "claude-code",
            "source": "t.jsonl",
            "index": i,
            "sha256": "0",
            "text": t,
            "suffix": s,
        },
        st.text(max_size=20),
        st.integers(0, 10),
        st.none() | st.text(max_size=5),
    )
)


@settings(max_examples=200, deadline=None)
@given(
    batch=st.lists(
        st.tuples(events, origins, st.sampled_from([ABSENT, None, "2026-11-20T10:00:00+02:00"])),
        min_size=1,
        max_size=6,
    )
)
def test_stored_bodies_are_what_pydantic_dumps(batch) -> None:
    """The append path validates dicts into their fields (no model) and copies a model's
    fields, instead of running pydantic's serializer; all three must give the same body
    (None-valued optional fields left out, whether not given or given as None)."""
    from eventlog.schema import _OMIT_WHEN_NONE, event_bodies, input_adapter, input_bodies

    items = [
        {
            **event,
            **({} if origin is ABSENT else {"origin": origin}),
            **({} if ts is ABSENT else {"ts": ts}),
        }
        for event, origin, ts in batch
    ]
    models = input_adapter().validate_python(items)
    expected = [
        {k: v for k, v in body.items() if not (k in _OMIT_WHEN_NONE and v is None)}
        for body in input_adapter().dump_python(models)
    ]
    assert event_bodies(models) == expected
    assert input_bodies(items) == expected


@pytest.mark.parametrize(
    ("value", "field"),
    [(float("nan"), "meta.deep.1"), (float("-inf"), "meta.deep.1"), (object(), None)],
)
def test_a_value_json_cannot_hold_is_refused_by_index_and_field(
    log: EventLog, log_dir: Path, value: object, field: str | None
) -> None:
    """NaN and infinities (which the encoder would write as null) and objects JSON has no form
    for are refused before anything is written, naming the event and, for numbers, the field;
    a real null beside them is not mistaken for one."""
    log.append("s", {"type": "user", "content": "before"})
    before = (log_dir / "s.jsonl").read_bytes()
    batch = [
        {"type": "user", "content": "ok", "meta": {"none": None}},
        {"type": "user", "content": "x", "meta": {"deep": [None, value]}},
    ]
    with pytest.raises(InvalidEventError) as info:
        log.append_many("s", batch)
    assert (info.value.index, info.value.field) == (1, field)
    assert (log_dir / "s.jsonl").read_bytes() == before
    assert log.append_many("s", batch[:1])[0].meta == {"none": None}


_fields = st.sampled_from(
    [
        "type",
        "content",
        "meta",
        "id",
        "ts",
        "tool",
        "params",
        "result",
        "action_id",
        "is_error",
        "origin",
        "status",
        "phase",
        "task",
        "colour",
    ]
)
_values = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4) | json_values
_kinds = st.sampled_from(["user", "action", "observation", "session_ended", "teleport"])


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.builds(
            lambda kind, extra: {"type": kind, **extra},
            _kinds,
            st.dictionaries(_fields, _values, max_size=4),
        )
        | _values,
        min_size=1,
        max_size=4,
    )
)
def test_the_dict_validator_refuses_what_the_models_refuse(items) -> None:
    """The append path's validator is derived from the event models; on any input it accepts
    exactly what they accept, and refuses the rest at the same locations."""
    from pydantic import ValidationError

    from eventlog.schema import input_adapter, input_bodies

    def outcome(validate):
        try:
            validate(items)
        except ValidationError as exc:
            return sorted((err["loc"], err["type"]) for err in exc.errors())
        return "ok"

    assert outcome(input_bodies) == outcome(input_adapter().validate_python)


def test_a_log_folders_listing_is_kept_while_the_folder_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read of every session lists the log folder (10,000 entries at 1M records): the
    listing is kept while the folder's size, times, inode and device are unchanged. A session
    made or removed since changes the folder's mtime, and the next listing names it (the
    folder's mtime is first put far back, so a change is seen on any clock's tick)."""
    from eventlog import layout

    monkeypatch.setattr(layout, "LISTED_SETTLE_NS", 0)  # kept at once
    scans: list[object] = []
    scandir = layout.os.scandir
    monkeypatch.setattr(layout.os, "scandir", lambda p: scans.append(p) or scandir(p))
    log = EventLog(tmp_path)
    for session in ("s1", "s2"):
        log.append(session, UserEvent(content=f"hello from {session}"))

    def listed() -> tuple[list[str], int]:
        before = len(scans)
        return log.sessions(), len(scans) - before  # the names, and whether it was read

    os.utime(tmp_path, ns=(1, 1))
    assert listed() == (["s1", "s2"], 1)
    assert listed() == (["s1", "s2"], 0)  # kept
    log.append("s3", UserEvent(content="a new session"))
    assert listed() == (["s1", "s2", "s3"], 1)
    os.utime(tmp_path, ns=(1, 1))
    assert listed() == (["s1", "s2", "s3"], 1)
    (tmp_path / "s2.jsonl").unlink()
    assert listed() == (["s1", "s3"], 1)
    assert listed() == (["s1", "s3"], 0)
    # another file system mounted over the folder: the same size, times and inode may be met
    stat = layout.os.stat

    def mounted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        st = stat(path, *args, **kwargs)
        if str(path) != str(tmp_path):
            return st
        fields = list(st)
        fields[2] += 1  # st_dev
        times = {name: getattr(st, name) for name in ("st_mtime_ns", "st_ctime_ns")}
        return os.stat_result(fields, times)

    monkeypatch.setattr(layout.os, "stat", mounted)
    assert listed() == (["s1", "s3"], 1)


def test_a_log_folder_changed_within_the_second_is_listed_again(tmp_path: Path) -> None:
    """A folder whose times are younger than a second is not kept: a change within the same
    clock tick would leave them as they were."""
    from eventlog import layout

    log = EventLog(tmp_path)
    log.append("s1", UserEvent(content="hello"))
    assert log.sessions() == ["s1"]
    assert str(tmp_path) not in layout._LISTED

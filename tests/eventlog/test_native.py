"""The C extension and its pure-Python equivalents: the same stored bytes, the same group
commit promises. Each test runs the Python side always and the extension's when it is built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typing_extensions import get_protocol_members

import eventlog.log
from eventlog.canonical import encode_batch, encode_batch_py, encode_record
from eventlog.errors import InvalidEventError
from eventlog.exact_json import MAX_DEPTH, json_shape_py
from eventlog.group_commit import PyGroupCommit
from eventlog.ids import new_event_ids
from eventlog.log import EventLog
from eventlog.native import Extension, SyncThread, lines
from eventlog.prepare import prepare_events
from eventlog.verify import verify
from tests.eventlog.test_append_read import events, json_values
from tests.eventlog.test_hostile_input import nested
from tests.eventlog.test_sync_failure import failing_disk  # noqa: F401 (a fixture)
from tests.eventlog.test_sync_failure import (
    test_a_background_sync_failure_under_batch_is_kept_until_raised as background_failure_case,
)

needs_extension = pytest.mark.skipif(
    lines is None, reason="the C extension eventlog._lines is not built here"
)
COMMITS = [
    pytest.param(PyGroupCommit, id="python"),
    pytest.param(lines and lines.GroupCommit, id="c", marks=needs_extension),
]


@needs_extension
def test_the_extension_defines_exactly_what_its_declared_shape_names() -> None:
    """``native.Extension`` is written by hand for the type checker (it cannot read the built
    module): a function added to or dropped from the C source without it fails here."""
    built = {name for name in dir(lines) if not name.startswith("__")}
    assert built == get_protocol_members(Extension)


@pytest.mark.parametrize("commit_type", COMMITS)
def test_either_group_commit_has_what_the_log_calls(commit_type) -> None:
    commit = commit_type(3600.0)
    try:
        assert all(hasattr(commit, name) for name in get_protocol_members(SyncThread))
    finally:
        commit.close()


@needs_extension
@settings(max_examples=300, deadline=None)
@given(
    batch=st.lists(
        st.tuples(events, st.sampled_from([None, "given-id"]), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    seq=st.integers(0, 2**40),
    prev=st.none() | st.just("ab" * 32),
    session=st.text(min_size=1, max_size=12),
)
def test_the_extension_encodes_exactly_what_python_does(batch, seq, prev, session) -> None:
    """Same records, same bytes, same hashes, for single and multi-record batches, bodies
    that give their own id and ts, and any content; and every line is ``encode_record``'s."""
    bodies = prepare_events(
        [
            {**event, **({"id": f"{own_id}-{i}"} if own_id else {})}
            | ({"ts": "2026-11-20T10:00:00Z"} if own_ts else {})
            for i, (event, own_id, own_ts) in enumerate(batch)
        ]
    )
    args = (bodies, 1, session, seq, "2026-11-23T00:00:00.000000Z", new_event_ids(len(bodies)))
    records, data, hashes = encode_batch_py(*args, prev)
    assert encode_batch(*args, prev) == (records, data, hashes)
    assert [list(r) for r in encode_batch(*args, prev)[0]] == [list(r) for r in records]
    assert data == b"".join(encode_record(r)[0] for r in records)
    assert [r["prev"] for r in records] == [prev, *hashes[:-1]]
    assert ("batch" in records[0]) == (len(bodies) > 1)


@needs_extension
@pytest.mark.parametrize("bad", [object(), 2**64])
def test_a_value_the_encoder_refuses_is_refused_the_same_way(bad: object) -> None:
    """What ``batch_json`` would have refused first still fails inside the extension as it
    does in Python: the same error, naming the record."""
    bodies = [{"type": "user", "content": "ok"}, {"type": "user", "content": "x", "meta": bad}]
    args = (bodies, 1, "s", 0, "2026-11-23T00:00:00.000000Z", new_event_ids(2), None)
    with pytest.raises(InvalidEventError) as native:
        encode_batch(*args)
    with pytest.raises(InvalidEventError) as python:
        encode_batch_py(*args)
    assert native.value.index == python.value.index == 1
    assert (type(native.value), str(native.value)) == (type(python.value), str(python.value))


@settings(max_examples=2, deadline=None)
@given(sessions=st.lists(st.lists(json_values, min_size=1, max_size=30), min_size=5, max_size=5))
def test_a_log_written_in_pure_python_verifies_and_reads_back(tmp_path_factory, sessions) -> None:
    """With the extension switched off (``AIRSSPEC_PURE_PYTHON=1``), a whole append, read and
    verify cycle runs in Python, and its log is one the default build verifies. One process
    writes five sessions of random values (a process each would pay its start-up five times)."""
    folder = tmp_path_factory.mktemp("pure")
    import orjson

    script = (
        "import sys, orjson; from eventlog.native import lines; assert lines is None; "
        "from eventlog.log import EventLog; "
        "sessions = orjson.loads(sys.stdin.buffer.read()); "
        "log = EventLog(sys.argv[1], durability='batch'); "
        "[log.append_many(f's{i}', [{'type': 'observation', 'result': v} for v in values]) "
        "for i, values in enumerate(sessions)]; "
        "log.append('s0', {'type': 'user', 'content': 'one more'}); log.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        input=orjson.dumps(sessions),
        env={**os.environ, "AIRSSPEC_PURE_PYTHON": "1"},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    with EventLog(folder) as log:
        report = verify(log)
        assert report.ok, report
        for i, values in enumerate(sessions):
            records = [located.record for located in log.read(f"s{i}")]
            stored = [r.result for r in records if r.type == "observation"]
            assert stored == values
        assert list(log.read("s0"))[-1].record.content == "one more"


@pytest.mark.parametrize("commit_type", COMMITS)
def test_the_group_commit_keeps_a_failed_sync_until_collected(commit_type, tmp_path: Path) -> None:
    """A sync that fails (here: a pipe, which cannot be synced) is kept with its descriptor,
    errno and first seq, once; a good file's sync is not reported."""
    commit = commit_type(3600.0)  # the thread never wakes on its own in this test
    read_end, write_end = os.pipe()
    good = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.write(good, b"x")
        commit.mark(good, 1)
        commit.mark(write_end, 7)
        commit.mark(write_end, 9)  # a later write keeps the first seq
        assert not commit.failed
        commit.run_once()
        assert commit.failed
        ((fd, err, first),) = commit.collect()
        assert (fd, first) == (write_end, 7)
        assert err in (22, 9)  # EINVAL (or EBADF on some kernels)
        assert not commit.failed and commit.collect() == []
        commit.run_once()  # nothing marked: nothing synced, nothing failed
        assert commit.collect() == []
    finally:
        commit.close()
        for fd in (read_end, write_end, good):
            os.close(fd)


@pytest.mark.parametrize("commit_type", COMMITS)
def test_forget_syncs_a_marked_file_then_drops_it(commit_type) -> None:
    commit = commit_type(3600.0)
    read_end, write_end = os.pipe()
    try:
        commit.mark(write_end, 3)
        commit.forget(write_end)  # synced now (and fails: a pipe)
        assert [(fd, first) for fd, _, first in commit.collect()] == [(write_end, 3)]
        commit.run_once()
        assert commit.collect() == []  # dropped: not synced again
        commit.forget(write_end)  # not marked: nothing to do
        assert commit.collect() == []
    finally:
        commit.close()
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize("commit_type", COMMITS)
def test_the_thread_syncs_on_its_own_each_interval(commit_type) -> None:
    """Without any call after ``mark``, the thread syncs within its interval; a marked file
    is synced again only when marked again."""
    commit = commit_type(0.005)
    read_end, write_end = os.pipe()
    try:
        for expected_first in (5, 6):
            commit.mark(write_end, expected_first)
            deadline = time.monotonic() + 30
            while not commit.failed and time.monotonic() < deadline:
                time.sleep(0.001)  # polls the condition (no event to wait on), up to the deadline
            assert [first for _, _, first in commit.collect()] == [expected_first]
    finally:
        commit.close()
        os.close(read_end)
        os.close(write_end)
    assert commit.collect() == []


@pytest.mark.parametrize("commit_type", COMMITS)
def test_a_background_sync_failure_is_kept_with_either_group_commit(
    commit_type,
    failing_disk: Path,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eventlog.log, "GroupCommit", commit_type)
    background_failure_case(failing_disk)


# Brackets, quotes, backslashes and the word null inside strings: none of them is structure.
TRICKY = '{[]}"\\nul '
tricky_values = st.recursive(
    st.none() | st.booleans() | st.integers(-9, 9) | st.text(TRICKY, max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(TRICKY, max_size=6), inner, max_size=3)
    ),
    max_leaves=30,
)


def depth_of(value: object) -> int:
    """How deep ``value`` nests, walked (a scalar 0, ``{}`` 1)."""
    children = value.values() if isinstance(value, dict) else value
    if not isinstance(value, dict | list):
        return 0
    return 1 + max(map(depth_of, children), default=0)


def holds_none(value: object) -> bool:
    if isinstance(value, dict):
        return any(map(holds_none, value.values()))
    return any(map(holds_none, value)) if isinstance(value, list) else value is None


NATIVE_SHAPE = getattr(lines, "json_shape", None)  # None: not built, or built before it
SHAPES = [
    pytest.param(json_shape_py, id="python"),
    pytest.param(
        NATIVE_SHAPE,
        id="c",
        marks=pytest.mark.skipif(NATIVE_SHAPE is None, reason="the C extension is not built here"),
    ),
]


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=400, deadline=None)
@given(value=tricky_values)
@example(value=["\\", {'\\"[': [["]}"]]}])
@example(value=[nested(MAX_DEPTH + 1), "]}" * 300])
def test_the_scan_finds_the_depth_and_nulls_of_the_value_whatever_its_strings_hold(
    shape, value: object
) -> None:
    """The one pass each batch's JSON gets (the nesting limit, the search for NaN written as
    null) counts what the value holds, never what a string spells."""
    for data in (json.dumps(value).encode(), orjson.dumps(value)):  # escaped, and as the log
        assert shape(data) == (depth_of(value), holds_none(value))

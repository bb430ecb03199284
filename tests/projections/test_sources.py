"""Documents as events: after any sequence of adds, edits and removals, the last
``source_indexed`` event of each path names exactly the file on disk, a second registration
appends nothing, and the registry's cache is derived state (deleted, it is read back from the
log without a new event)."""

from __future__ import annotations

import hashlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.log import EventLog
from eventlog.schema import MEMORY_SESSION, SourceIndexedRecord
from projections.sources import register_sources

NAMES = ("a.md", "notes/b.txt", "notes/deep/c.md")
operation = st.tuples(
    st.sampled_from(("write", "remove", "register")),
    st.sampled_from(NAMES),
    st.text("xyz\n#", max_size=12),
)


def _last_events(log: EventLog) -> dict[str, str]:
    last: dict[str, str] = {}
    for located in log.read(MEMORY_SESSION):
        record = located.record
        assert isinstance(record, SourceIndexedRecord)
        if record.sha256 is None:
            last.pop(record.path, None)
        else:
            last[record.path] = record.sha256
    return last


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(operation, min_size=1, max_size=12))
def test_the_last_event_of_each_path_is_the_file_on_disk(tmp_path_factory, operations) -> None:
    root = tmp_path_factory.mktemp("sources")
    sources, registry = root / "sources", root / "state" / "sources.json"
    log = EventLog(root / "log", durability="off")
    for action, name, content in operations:
        path = sources / name
        if action == "write":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        elif action == "remove":
            path.unlink(missing_ok=True)
        else:
            register_sources(log, sources, registry)
    appended = register_sources(log, sources, registry)
    on_disk = {
        p.relative_to(sources).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sources.rglob("*")
        if p.is_file()
    }
    assert _last_events(log) == on_disk
    for record in appended:  # what the last call appended, it appended for a reason
        assert record.sha256 == on_disk.get(record.path)
        assert record.size == (len((sources / record.path).read_bytes()) if record.sha256 else None)
    assert register_sources(log, sources, registry) == []
    registry.unlink()
    assert register_sources(log, sources, registry) == []
    registry.write_bytes(b'{"files": [')  # damaged: read back from the log, no new event
    assert register_sources(log, sources, registry) == []


def test_an_edit_that_keeps_size_and_mtime_is_still_registered(tmp_path) -> None:
    """A coarse clock can give two quick writes of the same size one mtime: a file modified
    just before a registration is read again by the next one, not trusted by its identity."""
    import os

    sources, registry = tmp_path / "sources", tmp_path / "state" / "sources.json"
    sources.mkdir()
    log = EventLog(tmp_path / "log", durability="off")
    doc = sources / "a.md"
    doc.write_text("retention 400")
    (first,) = register_sources(log, sources, registry)
    stamp = doc.stat().st_mtime_ns
    doc.write_text("retention 090")  # same size
    os.utime(doc, ns=(stamp, stamp))  # and the same mtime
    (second,) = register_sources(log, sources, registry)
    assert second.sha256 == hashlib.sha256(b"retention 090").hexdigest() != first.sha256


def test_a_registered_path_cannot_leave_the_sources_folder(tmp_path) -> None:
    from projections.sources import read_source

    (tmp_path / "sources").mkdir()
    outside = tmp_path / "secret.md"
    outside.write_text("not a document")
    sha = hashlib.sha256(outside.read_bytes()).hexdigest()
    assert read_source(tmp_path, "secret.md", sha) == "not a document"  # inside: read
    for path in ("../secret.md", str(outside), "a/../../secret.md"):
        assert read_source(tmp_path / "sources", path, sha) is None

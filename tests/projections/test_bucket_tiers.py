"""Derived tiers on the bucket (``[storage] url``): the cold Lance table at ``{url}/cold`` and
the analytics Delta table at ``{url}/analytics/events`` answer ``query`` and ``sql`` exactly
as the local workspace's tiers do for the same log; ``sql --parquet s3://...`` reads an export
on the bucket without DuckDB's ``httpfs`` (offline, against a moto server on loopback)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import bucket_config, wait_for
from tests.support.cli import run_cli
from tests.support.s3 import KEYS

pytestmark = pytest.mark.s3
pytest.importorskip(
    "deltalake", reason="deltalake is not installed (pip install 'airsspec-memory[s3]')"
)

OWNERS = {"s1": "ana", "s2": "ben"}
SESSIONS = {
    "s1": [
        {"type": "user", "content": "how do I rotate the signing keys of the deploy bot?"},
        {"type": "action", "tool": "grep", "params": {"q": "signing"}},
        {"type": "assistant", "content": "Rotate them with the vault CLI, then restart the bot."},
    ],
    "s2": [
        {"type": "user", "content": "the flaky integration test fails on the CI runner"},
        {"type": "assistant", "content": "Pin the database image and rerun the suite."},
    ],
}
QUERIES = [
    "SELECT * EXCLUDE (tokens) FROM events ORDER BY session, seq",
    "SELECT session, seq, raw FROM records ORDER BY session, seq",
    "SELECT * EXCLUDE (tokens) FROM sessions ORDER BY session",
    "SELECT session, seq, tool, answered FROM tool_calls ORDER BY session, seq",
]


def _config(root: Path, url: str | None, endpoint: str) -> Path:
    return bucket_config(root, url, endpoint, '[cold]\nembedder = "hash"\n')


def _open(config: Path):
    from airsspec.memory import Memory

    return Memory.open(config=config)


def _same_log_twice(tmp_path: Path, url: str, endpoint: str) -> tuple[Path, Path]:
    """A workspace on the bucket holding ``SESSIONS``, and a local one holding the very same
    bytes (the bucket's cache copied into its folder)."""
    remote = _config(tmp_path / "remote", url, endpoint)
    local = _config(tmp_path / "local", None, endpoint)
    with _open(remote) as memory:
        for session, events in SESSIONS.items():
            memory.sessions.start(session, user=OWNERS[session])
            memory.append_many(session, events)
        cache = memory.workspace.log.log_dir
        with _open(local) as other:
            folder = other.workspace.log_dir
            folder.mkdir(parents=True, exist_ok=True)
            for file in cache.glob("*.jsonl"):
                shutil.copyfile(file, folder / file.name)
    return remote, local


def _bucket_keys(url: str, endpoint: str, prefix: str) -> list[str]:
    import obstore
    from obstore.store import S3Store

    bucket, root = url[5:].split("/", 1)
    store = S3Store(
        bucket, prefix=root, endpoint=endpoint, client_options={"allow_http": True}, **KEYS
    )
    return sorted(m["path"] for batch in obstore.list(store, prefix) for m in batch)


def test_cold_table_on_the_bucket_answers_query_like_the_local_table(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    remote, local = _same_log_twice(tmp_path, bucket_url, moto_endpoint)
    answers = []
    for config in (remote, local):
        with _open(config) as memory:
            answers.append(memory.search("rotate signing keys", k=5))
    assert answers[0]["hits"], "the bucket's table answered nothing"
    assert answers[0]["hits"] == answers[1]["hits"]
    assert any(
        k.startswith("cold/units.lance/") for k in _bucket_keys(bucket_url, moto_endpoint, "cold/")
    )
    assert not (
        tmp_path / "remote" / ".airsspec" / "knowledge" / "vectors" / "units.lance"
    ).exists()
    # another machine (its own state) reads the same table without projecting anything
    other = _config(tmp_path / "other", bucket_url, moto_endpoint)
    with _open(other) as memory:
        assert memory.search("rotate signing keys", k=5, fresh=False)["hits"] == answers[0]["hits"]


def test_delta_table_on_the_bucket_answers_sql_like_the_local_log(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from projections.delta import exported_positions, open_table

    remote, local = _same_log_twice(tmp_path, bucket_url, moto_endpoint)
    with _open(remote) as on_bucket, _open(local) as on_disk:
        for sql in QUERIES:
            got = on_bucket.analytics(sql=sql)
            expected = on_disk.analytics(sql=sql)
            assert got.query(sql).rows == expected.query(sql).rows, sql
            assert got.dataset is not None and expected.dataset is None  # read the table
        options = on_bucket.workspace.settings.storage.object_store_options()
        location = on_bucket.workspace.analytics_location
        assert exported_positions(open_table(location, options)) == {"s1": 4, "s2": 3}
        assert on_bucket.workspace.export_delta() == 0, "a second export added records again"
        on_bucket.append("s2", {"type": "user", "content": "and on the nightly run?"})
        got = on_bucket.analytics(sql=QUERIES[1]).query(QUERIES[1]).rows
        assert [(s, q) for s, q, _ in got][-1] == ("s2", 4)
        assert len(got) == len(set((s, q) for s, q, _ in got)) == 8
        scoped = on_bucket.scoped(user="ben").analytics(sql=QUERIES[1]).query(QUERIES[1])
        assert {s for s, _, _ in scoped.rows} == {"s2"}
    keys = _bucket_keys(bucket_url, moto_endpoint, "analytics/events/")
    assert any("/_delta_log/" in k for k in keys)
    assert any("/session_date=" in k and k.endswith(".parquet") for k in keys)


@pytest.mark.slow
def test_sql_parquet_and_report_read_the_bucket_without_httpfs(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    import obstore
    from obstore.store import S3Store

    remote, local = _same_log_twice(tmp_path, bucket_url, moto_endpoint)
    exported = tmp_path / "exported"
    done = run_cli("export", "parquet", str(exported), cwd=local.parent)
    assert done.returncode == 0, done.stderr
    bucket, root = bucket_url[5:].split("/", 1)
    store = S3Store(
        bucket, prefix=root, endpoint=moto_endpoint, client_options={"allow_http": True}, **KEYS
    )
    for file in exported.rglob("*.parquet"):
        obstore.put(store, f"parquet/{file.relative_to(exported).as_posix()}", file.read_bytes())
    sql = "SELECT session, seq, type FROM events ORDER BY session, seq"
    from_disk = run_cli("sql", sql, "--parquet", str(exported), "--format", "csv", cwd=local.parent)
    from_bucket = run_cli(
        "sql", sql, "--parquet", f"{bucket_url}/parquet", "--format", "csv", cwd=remote.parent
    )
    assert from_bucket.returncode == 0, from_bucket.stderr
    assert from_bucket.stdout == from_disk.stdout and from_disk.stdout.count(b"\n") == 8
    for name, shown in (("sessions", b'"s2"'), ("tools", b'"grep"')):  # Delta table, local log
        reports = [run_cli("report", name, "--json", cwd=c.parent) for c in (remote, local)]
        assert reports[0].returncode == 0, reports[0].stderr
        assert reports[0].stdout == reports[1].stdout and shown in reports[0].stdout
    missing = run_cli("sql", sql, "--parquet", f"{bucket_url}/none", cwd=remote.parent)
    assert missing.returncode != 0 and missing.stderr.startswith(b"airsspec: error: --parquet")
    assert len(missing.stderr.splitlines()) == 1


def test_one_machine_at_a_time_holds_a_shared_tiers_lease(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from eventlog.errors import LeaseTimeoutError
    from eventlog.storage.lease import Lease
    from eventlog.storage.objects import ObjectStore

    a, b = (ObjectStore(bucket_url, tmp_path / m, endpoint=moto_endpoint, **KEYS) for m in "ab")
    with Lease(a, "cold", ttl=30).held():
        assert not Lease(b, "cold").try_acquire()
        with pytest.raises(LeaseTimeoutError), Lease(b, "cold").held(wait_s=0.3):
            pass
    taken = Lease(b, "cold", ttl=30)
    assert taken.try_acquire(), "a released lease was not free"
    late = Lease(a, "cold", ttl=0.01)  # b's lease is valid: a waits
    assert not late.try_acquire()
    expired = Lease(a, "x", ttl=0.01)
    assert expired.try_acquire()
    thief = Lease(b, "x", ttl=30)

    assert wait_for(thief.try_acquire, 5), "an expired lease was never taken over"
    assert not expired.renew() and expired.lost
    expired.release()  # refused by If-Match: the thief's lease stays
    assert not Lease(a, "x").try_acquire()


def test_cold_projector_on_a_bucket_writes_under_the_lease(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from eventlog.storage.lease import Lease

    remote = _config(tmp_path / "remote", bucket_url, moto_endpoint)
    with _open(remote) as memory:
        memory.append("s1", {"type": "user", "content": "hello"})
        (cold,) = memory.workspace.projectors(("cold",))
        store = memory.workspace.log.store
        with cold.state_store.exclusive():
            assert not Lease(store, "cold").try_acquire(), "another machine could write too"
        assert Lease(store, "cold").try_acquire(), "the lease outlived the writer"


def test_local_delta_table_is_exported_once_and_answers_like_the_log(tmp_path: Path) -> None:
    from projections.analytics import Analytics
    from projections.delta import delta_dataset

    config = _config(tmp_path / "ws", None, "")
    with _open(config) as memory:
        for session, events in SESSIONS.items():
            memory.append_many(session, events)
        ws = memory.workspace
        assert ws.export_delta() == 5 and ws.export_delta() == 0
        assert (ws.root / "analytics" / "events" / "_delta_log").is_dir()
        table = Analytics(ws.log_dir, dataset=delta_dataset(ws.analytics_location))
        log = Analytics(ws.log_dir)
        for sql in QUERIES[1:]:
            assert table.query(sql).rows == log.query(sql).rows, sql


def test_a_cold_writer_whose_lease_was_taken_over_stops_before_writing_again(
    tmp_path: Path, moto_endpoint: str, bucket_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import obstore
    import orjson

    from eventlog.errors import LeaseLostError

    remote = _config(tmp_path / "remote", bucket_url, moto_endpoint)
    with _open(remote) as memory:
        memory.append_many(
            "s1", [{"type": "user", "content": f"note {i} on the parser"} for i in range(600)]
        )
        store = memory.workspace.log.store
        embedder = memory.workspace.embedder()
        embed = embedder.embed
        calls = []

        def embed_then_lose_the_lease(texts):
            calls.append(len(texts))
            if len(calls) == 1:  # another machine takes the lease over meanwhile
                body = orjson.dumps({"holder": "other", "expires": 4e9})
                store._call("PUT", "locks/cold", obstore.put, "locks/cold", body)
            return embed(texts)

        monkeypatch.setattr(embedder, "embed", embed_then_lose_the_lease)
        with pytest.raises(LeaseLostError, match="locks/cold: taken over"):
            memory.project("cold")
        assert len(calls) == 1, "the writer embedded and wrote on after losing the lease"
        table = memory.workspace.projectors(("cold",))[0].store.open()
        assert table is None or table.count_rows() == 0, "the step embedded meanwhile was written"

        expired = orjson.dumps({"holder": "other", "expires": 0})  # the other machine is done
        store._call("PUT", "locks/cold", obstore.put, "locks/cold", expired)
        monkeypatch.undo()
        memory.project("cold")  # resumes from what was checkpointed: every row once
        table = memory.workspace.projectors(("cold",))[0].store.open()
        assert table is not None and table.count_rows() == 600

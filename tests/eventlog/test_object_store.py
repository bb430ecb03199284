"""The log on an S3-compatible bucket (a moto server on loopback) and on the storage protocol's
folder: the same bytes as the local log, seqs taken once by whoever creates their object, and
``verify`` over the concatenation of a session's objects.

Run as a script, this module is the writer process of the multi-writer test (and the bench).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from eventlog.errors import CorruptLogError, InvalidSessionIdError
from eventlog.log import EventLog
from eventlog.verify import verify
from tests.support.cli import run_cli
from tests.support.s3 import KEYS, two_machines

pytestmark = pytest.mark.s3


def object_log(url: str, endpoint: str, cache: Path, **options):
    """The log over ``url``, caching under ``cache`` (one simulated machine)."""
    from eventlog.storage.log import ObjectStoreLog
    from eventlog.storage.objects import ObjectStore

    return ObjectStoreLog(ObjectStore(url, cache, endpoint=endpoint, **KEYS, **options))


def raw_objects(url: str, endpoint: str, session: str) -> list[tuple[str, bytes]]:
    """A session's objects in key order, straight from the bucket (no cache)."""
    import obstore
    from obstore.store import S3Store

    bucket, prefix = url[5:].split("/", 1)
    store = S3Store(
        bucket, prefix=prefix, endpoint=endpoint, client_options={"allow_http": True}, **KEYS
    )
    keys = sorted(m["path"] for b in obstore.list(store, f"log/{session}/") for m in b)
    return [(k, bytes(obstore.get(store, k).bytes())) for k in keys]


EVENTS = [
    {"type": "user", "content": "hello"},
    [{"type": "thought", "content": "a batch"}, {"type": "assistant", "content": "of two"}],
    {"type": "action", "tool": "ls", "meta": {"n": 1.5, "ünï": "cödé"}},
]


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch):
    """Ids and times from a counter that ``restart()`` rewinds, so logs given the same events
    store the same bytes."""
    import eventlog.log
    import eventlog.storage.log

    counter = [0]

    def ids(n: int) -> list[str]:
        counter[0] += n
        return [f"id-{i:06d}" for i in range(counter[0] - n, counter[0])]

    for module in (eventlog.log, eventlog.storage.log):
        monkeypatch.setattr(module, "new_event_ids", ids)
        monkeypatch.setattr(module, "utc_now", lambda: "2026-01-01T00:00:00.000000Z")
    return lambda: counter.__setitem__(0, 0)


def _append_all(log, session: str) -> None:
    for item in EVENTS:
        log.append_many(session, item if isinstance(item, list) else [item])


def test_bucket_objects_concatenate_to_the_local_log_byte_for_byte(
    tmp_path: Path, moto_endpoint: str, bucket_url: str, fixed_clock
) -> None:
    from eventlog.storage.folder import FolderStore
    from eventlog.storage.log import ObjectStoreLog

    with EventLog(tmp_path / "local", durability="off") as local:
        _append_all(local, "s1")
    expected = (tmp_path / "local" / "s1.jsonl").read_bytes()
    remote = object_log(bucket_url, moto_endpoint, tmp_path / "cache")
    folder = ObjectStoreLog(FolderStore(tmp_path / "folder", durable=False))
    for log in (remote, folder):
        fixed_clock()
        _append_all(log, "s1")
        assert log.store.read_bytes("s1") == expected
    assert (tmp_path / "folder" / "s1.jsonl").read_bytes() == expected
    objects = raw_objects(bucket_url, moto_endpoint, "s1")
    assert [k.rsplit("/", 1)[1] for k, _ in objects] == [f"{n:020d}.jsonl" for n in (1, 2, 4)]
    assert b"".join(data for _, data in objects) == expected  # not only the cache's copy
    for log in (remote, folder):
        report = verify(log)
        assert report.ok and report.records == 4 and report.sessions[0].head_seq == 4
    fresh = object_log(bucket_url, moto_endpoint, tmp_path / "other-cache")
    assert [r.raw for r in fresh.read("s1")] == expected.splitlines()
    assert fresh.info("s1").records == 4 and fresh.sessions() == ["s1"]


def test_two_machines_racing_for_one_seq_both_land_rechained(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    a = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    b = object_log(bucket_url, moto_endpoint, tmp_path / "b")
    a.append("s", {"type": "user", "content": "a1"})
    b.append("s", {"type": "user", "content": "b1"})  # b's cache learns a1 first
    a.append("s", {"type": "user", "content": "a2"})  # a still believes seq 1 is the end
    assert a.conflicts == 1, "a lost seq 2 to b and re-chained"
    records = [r.record for r in object_log(bucket_url, moto_endpoint, tmp_path / "c").read("s")]
    assert [(r.seq, r.content) for r in records] == [(1, "a1"), (2, "b1"), (3, "a2")]
    assert [r.prev for r in records[1:]] == [r.hash for r in records[:-1]]


def test_a_session_id_differing_only_in_case_is_refused_across_machines(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    object_log(bucket_url, moto_endpoint, tmp_path / "a").append(
        "Build", {"type": "user", "content": "x"}
    )
    other = object_log(bucket_url, moto_endpoint, tmp_path / "b")
    with pytest.raises(InvalidSessionIdError, match="'Build' exists and differs only in case"):
        other.append("build", {"type": "user", "content": "y"})
    assert other.sessions() == ["Build"]


def test_a_store_that_ignores_if_none_match_is_refused_for_many_writers(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    import obstore

    from eventlog.errors import ConditionalWritesError

    log = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    # a store that overwrites where it should refuse: a create that is a plain PUT
    log.store._create = lambda key, data: obstore.put(log.store._store, key, data)["e_tag"]
    with pytest.raises(ConditionalWritesError, match="single_writer = true"):
        log.append("s", {"type": "user", "content": "x"})
    assert log.sessions() == [], "nothing was appended"
    single = object_log(bucket_url, moto_endpoint, tmp_path / "b", single_writer=True)
    single.store._create = log.store._create
    assert single.append("s", {"type": "user", "content": "x"}).seq == 1


def test_verify_names_the_cut_when_a_sessions_newest_object_is_deleted(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    log = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    for i in range(3):
        log.append_many("s", [{"type": "user", "content": f"{i}"}] * 2)
    assert verify(log).ok
    log.store.delete_object("log/s/00000000000000000005.jsonl")
    for cache in ("a", "fresh"):  # the writer's own cache mirrors the cut as a fresh one does
        report = verify(object_log(bucket_url, moto_endpoint, tmp_path / cache))
        (session,) = report.sessions
        assert session.problem is not None and session.records == 4
        assert "the log ends at seq 4, but its head names seq 6" in session.problem.message
        assert session.problem.seq == 5
    with pytest.raises(CorruptLogError, match="head names seq 6: records were removed"):
        object_log(bucket_url, moto_endpoint, tmp_path / "writer").append(
            "s", {"type": "user", "content": "x"}
        )
    assert len(raw_objects(bucket_url, moto_endpoint, "s")) == 2, "the cut was not filled"


def test_an_append_after_a_seq_or_creating_a_session_never_fills_a_cut(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    """``after`` and ``new`` read the newest end rather than a remembered one: they check it
    against the head as a first append does, so a writer that names the seq where the log now
    ends (or none, when every object is gone) is refused instead of writing into the cut."""
    log = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    for session in ("s", "t"):
        for i in range(3):
            log.append_many(session, [{"type": "user", "content": f"{i}"}] * 2)
    log.store.delete_object("log/s/00000000000000000005.jsonl")
    for key, _ in raw_objects(bucket_url, moto_endpoint, "t"):
        log.store.delete_object(key)
    writer = object_log(bucket_url, moto_endpoint, tmp_path / "writer")
    for _ in range(2):  # every time, not only as its first append to the session
        with pytest.raises(CorruptLogError, match="head names seq 6: records were removed"):
            writer.append("s", {"type": "user", "content": "after 4"}, after=4)
        with pytest.raises(CorruptLogError, match="head names seq 6: records were removed"):
            writer.append_many("t", [{"type": "user", "content": "first"}], new=True)
    assert len(raw_objects(bucket_url, moto_endpoint, "s")) == 2, "the cut was not filled"
    assert raw_objects(bucket_url, moto_endpoint, "t") == []


def test_storage_url_in_airsspec_toml_puts_every_command_on_the_bucket(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    config = (
        f'[storage]\nurl = "{bucket_url}"\nendpoint = "{moto_endpoint}"\nregion = "us-east-1"\n'
        'access_key_id = "testing"\nsecret_access_key = "testing"\n'
    )
    for machine in ("a", "b"):  # two machines sharing the bucket
        (tmp_path / machine).mkdir()
        (tmp_path / machine / "airsspec.toml").write_text(config)
    added = run_cli(
        "append", "s1", "--json", cwd=tmp_path / "a", stdin=b'{"type":"user","content":"hi"}\n'
    )
    assert added.returncode == 0, added.stderr
    assert not (tmp_path / "a" / ".airsspec" / "contexts" / "agent" / "s1.jsonl").exists()
    objects = b"".join(data for _, data in raw_objects(bucket_url, moto_endpoint, "s1"))
    b = tmp_path / "b"  # another machine, its own cache
    replayed = run_cli("replay", "s1", "--json", cwd=b)
    assert replayed.returncode == 0 and replayed.stdout == objects, replayed.stderr
    listed = run_cli("sessions", cwd=b)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:2] == [b"s1", b"1"]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "airsspec.toml").write_text(config)
    for machine in (b, tmp_path / "c"):  # c: verify is the first command it runs
        checked = run_cli("verify", "s1", cwd=machine)
        assert checked.stdout == b"OK: 1 session(s), 1 record(s) verified\n", checked.stderr
    bad = run_cli("sessions", cwd=b, env={"AIRSSPEC_STORAGE_URL": "gs://x"})
    assert bad.returncode != 0 and bad.stderr.startswith(b"airsspec: error:")
    assert b"[storage] url" in bad.stderr and len(bad.stderr.splitlines()) == 1
    down = run_cli("sessions", cwd=b, env={"AIRSSPEC_STORAGE_ENDPOINT": "http://127.0.0.1:1"})
    assert down.returncode != 0 and down.stderr.startswith(b"airsspec: error: s3://")
    assert b"LIST failed" in down.stderr and len(down.stderr.splitlines()) == 1


def test_two_machines_of_two_writers_lose_no_acknowledged_record(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    seconds = float(os.environ.get("AIRSSPEC_S3_TEST_SECONDS", "4"))
    acked = two_machines(bucket_url, moto_endpoint, tmp_path, seconds)
    assert set(acked) == {"shared", "p-A1", "p-A2", "p-B1", "p-B2"}
    third = object_log(bucket_url, moto_endpoint, tmp_path / "machine-C")
    for session, acks in acked.items():
        stored = [(r.record.seq, r.record.id) for r in third.read(session)]
        assert sorted(acks) == stored, f"{session}: acknowledged != stored"
        assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))  # no gap, no dup
        assert len({id_ for _, id_ in stored}) == len(stored)
    report = verify(third)
    assert report.ok and report.records == sum(map(len, acked.values()))
    last = raw_objects(bucket_url, moto_endpoint, "shared")[-1][0]
    third.store.delete_object(last)
    cut = verify(object_log(bucket_url, moto_endpoint, tmp_path / "machine-D"), ["shared"])
    problem = cut.sessions[0].problem
    assert problem is not None and "records were removed from the end" in problem.message


def _writer(url: str, endpoint: str, cache: str, seconds: str, name: str) -> None:
    """Append to the shared session and to a private one until ``seconds`` pass, printing
    ``session seq id`` for each record once its append returned."""
    log = object_log(url, endpoint, Path(cache))
    deadline = time.monotonic() + float(seconds)
    i = 0
    while time.monotonic() < deadline:
        session = "shared" if i % 2 == 0 else f"p-{name}"
        events = [{"type": "user", "content": f"{name}:{i}"}] * (1 + i % 3 // 2)
        for record in log.append_many(session, events):
            sys.stdout.write(f"{session} {record.seq} {record.id}\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    _writer(*sys.argv[1:6])


def test_sealed_content_reaches_the_bucket_only_as_ciphertext(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from airsspec.workspace import Workspace

    (tmp_path / "airsspec.toml").write_text(
        f'[storage]\nurl = "{bucket_url}"\nendpoint = "{moto_endpoint}"\nregion = "us-east-1"\n'
        'access_key_id = "testing"\nsecret_access_key = "testing"\n'
        '[privacy]\nencrypt = "session"\n'
    )
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        stored = ws.log.append("s", {"type": "user", "content": "the launch code is 0000"})
        assert stored.content == "the launch code is 0000"
        assert [r.record.content for r in ws.log.read("s")] == ["the launch code is 0000"]
        assert verify(ws.log).ok
    ((_, data),) = raw_objects(bucket_url, moto_endpoint, "s")
    assert b"launch code" not in data and b'"sealed"' in data


def test_of_two_machines_creating_one_session_only_the_first_writes(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from eventlog.errors import SessionExistsError

    a = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    b = object_log(bucket_url, moto_endpoint, tmp_path / "b")
    assert b.store.tail("s").seq == 0  # b has seen the session empty ...
    a.append_many("s", [{"type": "session_started", "user": "ana"}], system=True, new=True)
    with pytest.raises(SessionExistsError, match="'s'"):  # ... and its claim of seq 1 loses
        b.append_many("s", [{"type": "session_started", "user": "ben"}], system=True, new=True)
    records = [r.record for r in object_log(bucket_url, moto_endpoint, tmp_path / "c").read("s")]
    assert [(r.seq, r.user) for r in records] == [(1, "ana")]


def test_of_two_machines_appending_after_the_same_record_only_the_first_writes(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    """``after`` on a bucket: the newest end is read, and the next seq claimed create-only, so
    a machine whose end is stale, or which loses the claim, is told and writes nothing."""
    from eventlog.errors import SessionMovedError

    a = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    b = object_log(bucket_url, moto_endpoint, tmp_path / "b")
    a.append("s", {"type": "user", "content": "first"})
    head, stored_head = b.store.tail("s"), b.store.head("s")  # both have read seq 1 as the end
    assert a.append("s", {"type": "user", "content": "a after 1"}, after=1).seq == 2
    with pytest.raises(SessionMovedError, match="after seq 1, but its last record is seq 2"):
        b.append("s", {"type": "user", "content": "b after 1"}, after=1)
    # a machine that reads the end just before another claims the next seq loses the claim
    fresh, fresh_head = b.store.tail, b.store.head
    b.store.tail = lambda session: head if session == "s" else fresh(session)  # type: ignore[method-assign]
    b.store.head = lambda session: stored_head if session == "s" else fresh_head(session)  # type: ignore[method-assign]
    with pytest.raises(SessionMovedError, match="after seq 1, but its last record is seq 2"):
        b.append("s", {"type": "user", "content": "b after 1, again"}, after=1)
    records = [r.record for r in object_log(bucket_url, moto_endpoint, tmp_path / "c").read("s")]
    assert [(r.seq, r.content) for r in records] == [(1, "first"), (2, "a after 1")]


def _sealed_machines(tmp_path: Path, endpoint: str, url: str, more: str = "") -> None:
    """Two machines, ``a`` and ``b`` under ``tmp_path``, sharing the bucket's log and keys,
    records sealed per user (and ``more`` of ``airsspec.toml``)."""
    config = (
        f'[storage]\nurl = "{url}"\nendpoint = "{endpoint}"\nregion = "us-east-1"\n'
        'access_key_id = "testing"\nsecret_access_key = "testing"\n'
        '[privacy]\nencrypt = "user"\n'
    )
    for machine in ("a", "b"):
        (tmp_path / machine).mkdir()
        (tmp_path / machine / "airsspec.toml").write_text(config + more)


def test_machines_sharing_a_bucket_share_data_keys_and_a_destroyed_key_is_gone_for_all(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from airsspec import Memory
    from eventlog.crypto import FORGOTTEN, key_id
    from eventlog.keystores import BucketKeyStore
    from eventlog.storage.objects import ObjectStore

    _sealed_machines(tmp_path, moto_endpoint, bucket_url)
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash"}
    with Memory.open(tmp_path / "a") as a:
        a.scoped(user="ana").append("a1", {"type": "user", "content": "the vault is in eu-west"})
    assert not (tmp_path / "a" / ".airsspec" / "state" / "keys").exists()  # on the bucket
    shared = BucketKeyStore(ObjectStore(bucket_url, tmp_path / "c", endpoint=moto_endpoint, **KEYS))
    assert shared.key(key_id("user:ana"), create=False) is not None
    assert run_cli("verify", cwd=tmp_path / "b").returncode == 0
    replayed = run_cli("replay", "a1", cwd=tmp_path / "b", env=env)
    assert b"the vault is in eu-west" in replayed.stdout, replayed.stderr  # b opens a's record
    with Memory.open(tmp_path / "a") as a:
        done = run_cli("forget", "--user", "ana", cwd=tmp_path / "b", env=env)
        assert done.returncode == 0, done.stderr
        a.workspace.log.sealer.keys.recheck = 0  # no wait for a's cached copy to expire
        assert [r.content for r in a.replay("a1") if r.type == "user"] == [FORGOTTEN]
    shared.recheck = 0
    assert shared.key(key_id("user:ana"), create=False) is None


def test_a_machine_following_a_forget_folds_nothing_with_a_key_it_kept(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    """A machine that read ana's records keeps her key a while (``recheck``); when it follows
    a forget another machine ran, it drops what it kept of the keys the event names before it
    folds her sessions again: nothing of hers is written back in the clear here."""
    from airsspec import Memory

    _sealed_machines(tmp_path, moto_endpoint, bucket_url, '[cold]\nembedder = "hash"\n')
    with Memory.open(tmp_path / "a") as a:
        a.scoped(user="ana").append("a1", {"type": "user", "content": "CANARYFOLLOW in eu-west"})
        a.project()
        window = tmp_path / "a" / ".airsspec" / "state" / "hot" / "a1.json"
        assert b"CANARYFOLLOW" in window.read_bytes()  # a holds her words, and her key
        a.workspace.log.sealer.keys.recheck = 3600  # kept well past the forget
        done = run_cli("forget", "--user", "ana", cwd=tmp_path / "b")
        assert done.returncode == 0, done.stderr
        a.project()  # follows the forget: drops her session, folds it again
        assert b"CANARYFOLLOW" not in window.read_bytes()
        held = [
            p
            for p in (tmp_path / "a" / ".airsspec").rglob("*")
            if p.is_file() and b"CANARYFOLLOW" in p.read_bytes()
        ]
        assert held == []


def test_a_writer_that_queues_gets_the_next_head_update_of_every_other_writer_refused(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    """Queuing rewrites the head naming the queue marker: other bytes, so another ETag (a
    bucket gives the same bytes the same ETag, and an ``If-Match`` on it would still hold).
    Another writer's next head update is then refused, which sends it to list the session
    (and see the marker) before its next append; the head still names the same record."""
    from eventlog.storage.turns import LOSSES_BEFORE_QUEUING

    a = object_log(bucket_url, moto_endpoint, tmp_path / "a")
    b = object_log(bucket_url, moto_endpoint, tmp_path / "b")
    a.append("s", {"type": "user", "content": "first"})  # a wrote the head: it holds its ETag
    named = b.store.head("s")
    for _ in range(LOSSES_BEFORE_QUEUING):
        b.store._lost("s")  # b lost that many races in a row: it queues
    assert "s" in b.store._mine and b.store.head("s") == named
    assert "s" not in a._contended
    a.append("s", {"type": "user", "content": "second"})  # in flight before a lists again
    assert "s" in a._contended, "a's head update went through: it would not list the session"
    assert a.store.head("s").seq == 2


def test_following_an_idle_bucket_costs_one_listing_a_round(
    tmp_path: Path, moto_endpoint: str, bucket_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower (what ``watch`` runs every second) lists the heads once a round and fetches
    only the sessions whose head moved; every ``full_every``-th round it looks at every
    session, which also finds a batch whose writer died before moving its head."""
    from eventlog.storage.objects import ObjectStore

    writer = object_log(bucket_url, moto_endpoint, tmp_path / "writer")
    for i in range(20):
        writer.append(f"s{i}", {"type": "user", "content": f"first of {i}"})
    watcher = object_log(bucket_url, moto_endpoint, tmp_path / "watcher")
    requests: list[str] = []
    call = ObjectStore._call

    def counted(self, what, key, *args, **kwargs):
        requests.append(f"{what} {key}")
        return call(self, what, key, *args, **kwargs)

    monkeypatch.setattr(ObjectStore, "_call", counted)
    follow_once = watcher.store.follower(full_every=4)

    def cached(session: str) -> int:
        with watcher.store.cache.locked(session):
            return sum(e.records for e in watcher.store.cache.entries(session))

    follow_once()  # the first round looks at every session
    assert [cached(f"s{i}") for i in range(20)] == [1] * 20
    requests.clear()
    follow_once()
    assert requests == ["LIST heads/"], "an idle round lists the heads and nothing else"

    writer.append("s7", {"type": "user", "content": "second"})
    requests.clear()
    follow_once()
    assert requests[0] == "LIST heads/" and all("s7" in r for r in requests[1:]), requests
    assert cached("s7") == 2 and len(requests) <= 4

    # a batch whose head never moved (its writer died in between): the full round brings it
    monkeypatch.setattr(ObjectStore, "set_head", lambda *args, **kwargs: False)
    writer.append("s3", {"type": "user", "content": "head not moved"})
    follow_once()
    assert cached("s3") == 1, "a round that saw no head move fetched nothing"
    follow_once()  # the fourth round since the first: a full one
    assert cached("s3") == 2


def test_a_rebuild_in_several_jobs_over_keys_on_the_bucket_completes(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    """With the data keys on the bucket, a fold in forked workers would open sealed records
    through the bucket's client, whose runtime a forked process must not inherit (the workers
    crashed or hung: the command segfaulted or never ended). Such a fold runs in the process
    itself; the command ends 0 and leaves no worker behind."""
    import subprocess

    from airsspec import Memory
    from tests.conftest import children, wait_for

    (tmp_path / "airsspec.toml").write_text(
        f'[storage]\nurl = "{bucket_url}"\nendpoint = "{moto_endpoint}"\nregion = "us-east-1"\n'
        'access_key_id = "testing"\nsecret_access_key = "testing"\n'
        '[privacy]\nencrypt = "user"\n'
    )
    env = {**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash"}
    with Memory.open(tmp_path) as memory:
        for user in ("ana", "ben", "cat"):
            memory.scoped(user=user).append(f"s-{user}", {"type": "user", "content": "hello"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "rebuild", "--projection", "warm", "--jobs", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        started = children(proc.pid)
        proc.kill()
        _, err = proc.communicate()
        assert wait_for(lambda: not any(Path(f"/proc/{c}").exists() for c in started), 10)
        pytest.fail("the rebuild never ended")
    assert proc.returncode == 0, err.decode()[-2000:]

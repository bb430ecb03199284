"""Projector states shared on a bucket (``projections.bucket_store``): machines projecting one
log publish their state files with conditional writes, so a published state is always whole and
always the one a rebuild from the log gives at its seq; a machine that loses a race keeps the
winner's state when it is further, and replaces it (on the ETag just read) when it is behind.
Offline, against a moto server on loopback."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, bucket_config, snapshot

pytestmark = pytest.mark.s3

TIERS = ("hot", "learnings", "tokens")


def _config(root: Path, url: str | None, endpoint: str) -> Path:
    return bucket_config(root, url, endpoint, "[memory]\nhot_window_size = 4\n")


def _open(config: Path) -> Any:
    from airsspec.memory import Memory

    return Memory.open(config=config)


def _append(memory: Any, session: str, n: int) -> None:
    memory.append_many(
        session,
        [
            {"type": "user" if i % 2 else "assistant", "content": f"{session} message {i}"}
            for i in range(n)
        ],
        project=False,  # the projectors under test do all the projecting
    )


class Rebuilds:
    """The state files a local rebuild from the bucket's log gives, per (tier, session, seq)."""

    def __init__(self, tmp: Path, endpoint: str, log_dir: Path) -> None:
        self.tmp, self.log_dir = tmp, log_dir
        self.config = _config(tmp / "reference", None, endpoint)
        self.memory = _open(self.config)
        self.made: dict[tuple[str, str, int], bytes] = {}

    def state(self, tier: str, session: str, seq: int) -> bytes:
        """The bytes of ``session``'s state file of ``tier`` folded from zero up to ``seq``."""
        from eventlog.log import EventLog
        from projections.engine import Runner, stop_after

        key = (tier, session, seq)
        if key not in self.made:
            ws = self.memory.workspace
            folder = ws.log_dir
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.log_dir / f"{session}.jsonl", folder / f"{session}.jsonl")
            out = self.tmp / "rebuilds" / f"{tier}-{session}-{seq}"
            (projector,) = ws.projectors((tier,), root=out)
            log = EventLog(folder, durability="off")
            Runner(log, [projector]).catch_up(stop_after(seq=seq), [session])
            self.made[key] = Path(projector.state_store.output_files(session)[0]).read_bytes()
        return self.made[key]


def _published(memory: Any) -> dict[str, bytes]:
    """Every published state object on the bucket, by key."""
    store = memory.workspace.log.store
    return {
        m["path"]: got[0]
        for m in store._list("projections/")
        if (got := store._get(m["path"])) is not None
    }


def _seq_of(tier: str, data: bytes) -> int:
    """The checkpoint seq a published state file names."""
    import io

    import orjson

    if tier == "tokens":
        import pyarrow.parquet as pq

        meta = pq.read_table(io.BytesIO(data)).schema.metadata[b"airsspec"]
        return orjson.loads(meta)["checkpoint"]["seq"]
    return orjson.loads(data)["checkpoint"]["seq"]


def _fold_to(projector: Any, log: Any, session: str, seq: int) -> tuple[Any, Any]:
    """``session`` folded by ``projector`` up to ``seq``, with its checkpoint."""
    from projections.checkpoints import Checkpoint

    state, last = projector.empty(session), None
    for located in log.read(session):
        if located.record.seq > seq:
            break
        state, last = projector.apply(state, located.record), located
    assert last is not None
    return state, Checkpoint(last.record.seq, last.record.hash, last.end)


def test_a_lost_publication_keeps_the_further_state_and_never_moves_back(
    tmp_path: Path, bucket_url: str, moto_endpoint: str
) -> None:
    from projections.engine import Runner

    one = _config(tmp_path / "one", bucket_url, moto_endpoint)
    two = _config(tmp_path / "two", bucket_url, moto_endpoint)
    with _open(one) as a, _open(two) as b:
        _append(a, "s1", 5)
        (pa,) = a.workspace.projectors(("hot",))
        (pb,) = b.workspace.projectors(("hot",))
        sa, sb = pa.state_store, pb.state_store
        key = sa.key("s1")
        rebuilds = Rebuilds(tmp_path, moto_endpoint, a.workspace.log.log_dir)

        # A reads "nothing published", then B publishes seq 5 (create-only: it wins).
        sa.fetch("s1")
        Runner(b.workspace.log, [pb]).catch_up()
        assert _published(a)[key] == rebuilds.state("hot", "s1", 5)
        # A, behind (seq 3), loses its create and keeps B's state, further than its own.
        state, checkpoint = _fold_to(pa, a.workspace.log, "s1", 3)
        sa.save("s1", state, checkpoint)
        assert sa.lost == 1
        assert _published(a)[key] == rebuilds.state("hot", "s1", 5)
        assert sa.local.path("s1").read_bytes() == rebuilds.state("hot", "s1", 5)

        # B read the object at seq 5; A then publishes seq 7 over it (If-Match on 5's ETag).
        _append(a, "s1", 2)
        Runner(a.workspace.log, [pa]).catch_up()
        assert _published(a)[key] == rebuilds.state("hot", "s1", 7)
        # B, further (seq 9) with a stale ETag, loses once, reads 7, and replaces it.
        _append(a, "s1", 2)
        state, checkpoint = _fold_to(pb, b.workspace.log, "s1", 9)
        sb.save("s1", state, checkpoint)
        assert sb.lost == 1
        assert _published(a)[key] == rebuilds.state("hot", "s1", 9)
        # A machine that lost its folder resumes from the published state, folding nothing.
        shutil.rmtree(a.workspace.layout.tier_dir("hot"))
        a.workspace.layout.tier_dir("hot").with_name("hot.manifest.json").unlink()
        (fresh,) = a.workspace.projectors(("hot",))
        (report,) = Runner(a.workspace.log, [fresh]).catch_up()
        assert report.applied == 0
        assert fresh.state_store.local.path("s1").read_bytes() == rebuilds.state("hot", "s1", 9)
        rebuilds.memory.close()


RACER = """
import sys
from pathlib import Path
from airsspec.memory import Memory
from projections.engine import Runner

config, stop, tiers = sys.argv[1], Path(sys.argv[2]), tuple(sys.argv[3].split(","))
lost = 0
with Memory.open(config=config) as memory:
    ws = memory.workspace
    while True:
        done = stop.exists()  # the log is whole once this exists: one more catch-up ends it
        projectors = ws.projectors(tiers)
        Runner(ws.log, projectors).catch_up()
        lost += sum(p.state_store.lost for p in projectors)
        if done:
            break
print(lost)
"""


@pytest.mark.slow
def test_racing_projectors_publish_only_states_a_rebuild_gives(
    tmp_path: Path, bucket_url: str, moto_endpoint: str
) -> None:
    """Two projector processes (each its own folder and log cache) project the bucket while
    a writer appends: every published state ever seen is the one a rebuild from the log gives
    at its seq, and both end with the states of a local rebuild."""
    configs = [_config(tmp_path / n, bucket_url, moto_endpoint) for n in ("one", "two", "w")]
    stop = tmp_path / "stop"
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    with _open(configs[2]) as writer:
        _append(writer, "s1", 2)
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, str(c), str(stop), ",".join(TIERS)],
                stdout=subprocess.PIPE,
                env=env,
            )
            for c in configs[:2]
        ]
        seen: list[dict[str, bytes]] = []
        finished = threading.Event()

        def watch() -> None:  # what a reader of the bucket sees, as often as it can look
            while not finished.is_set():
                seen.append(_published(writer))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            for i in range(12):
                _append(writer, f"s{1 + i % 3}", 3)
            stop.touch()
            outs = [racer.communicate(timeout=300)[0] for racer in racers]
        finally:
            for racer in racers:
                racer.kill()
            finished.set()
            watcher.join()
        assert all(racer.returncode == 0 for racer in racers)
        seen.append(_published(writer))
        log_dir = writer.workspace.log.log_dir
        rebuilds = Rebuilds(tmp_path, moto_endpoint, log_dir)
        checked = 0
        for published in seen:
            for key, data in published.items():
                _, tier, name = key.rsplit("/", 2)
                session = name.rsplit(".", 1)[0]
                assert data == rebuilds.state(tier, session, _seq_of(tier, data)), key
                checked += 1
        heads = {s: writer.workspace.log.head(s).seq for s in ("s1", "s2", "s3")}
        last = seen[-1]
        assert {k.rsplit("/", 1)[-1].rsplit(".", 1)[0] for k in last} == set(heads)
        for key, data in last.items():
            _, tier, name = key.rsplit("/", 2)
            session = name.rsplit(".", 1)[0]
            assert data == rebuilds.state(tier, session, heads[session])
        for config in configs[:2]:
            root = config.parent / ".airsspec" / "state"
            for tier in TIERS:
                suffix = ".parquet" if tier == "tokens" else ".json"
                assert snapshot(root / tier) == {
                    f"{s}{suffix}": rebuilds.state(tier, s, heads[s]) for s in heads
                }
        rebuilds.memory.close()
    print(f"published states checked: {checked}; lost races: {[o.strip() for o in outs]}")


def test_a_machine_without_cold_checkpoints_takes_the_published_ones(
    tmp_path: Path, bucket_url: str, moto_endpoint: str
) -> None:
    """The cold checkpoints name rows of the table on the bucket: a second machine resumes from
    them (folding and embedding nothing again), and the table keeps one row per unit."""
    from projections.engine import Runner

    text = '[cold]\nembedder = "hash"\n'
    one = bucket_config(tmp_path / "one", bucket_url, moto_endpoint, text)
    two = bucket_config(tmp_path / "two", bucket_url, moto_endpoint, text)
    with _open(one) as a, _open(two) as b:
        _append(a, "s1", 4)
        _append(a, "s2", 3)
        (ca,) = a.workspace.projectors(("cold",))
        assert Runner(a.workspace.log, [ca]).catch_up()[0].applied == 7
        rows = ca.item_count()
        (cb,) = b.workspace.projectors(("cold",))
        (report,) = Runner(b.workspace.log, [cb]).catch_up()
        assert report.applied == 0 and not report.rebuilt
        assert cb.item_count() == rows
        for session in ("s1", "s2"):
            mine = cb.state_store.local.path(session).read_bytes()
            assert mine == ca.state_store.local.path(session).read_bytes()

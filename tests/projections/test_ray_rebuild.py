"""The Ray engine for cold rebuilds: the same rows and vectors as a local rebuild, in exactly one
new Lance version, with checkpoints an incremental ``project`` continues from; without the extra,
one error line naming it. The Ray tests are opt-in (``-m ray`` or ``AIRSSPEC_RAY_TESTS=1``): they
start a two-node loopback cluster and check nothing it started is left running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from airsspec.memory import Memory
from tests.conftest import REPO, SHARED_DATA, children, wait_for
from tests.support.cli import run_cli
from tests.support.logs import edit_config

LOCOMO = SHARED_DATA / "locomo-dev" / "locomo-dev.json"


@pytest.fixture
def ray_enabled(request: pytest.FixtureRequest) -> None:
    """Skip unless Ray tests were asked for and the extra is installed."""
    asked = "ray" in (request.config.getoption("markexpr") or "").replace("not ray", "")
    if not (asked or os.environ.get("AIRSSPEC_RAY_TESTS") == "1"):
        pytest.skip("Ray tests are opt-in: -m ray or AIRSSPEC_RAY_TESTS=1")
    pytest.importorskip("ray")
    pytest.importorskip("lance")
    if not LOCOMO.is_file():
        pytest.skip(f"{LOCOMO} is absent (the real LoCoMo log)")


def make_workspace(root: Path, embedder: str, records: int) -> Memory:
    """A workspace holding ``records`` real LoCoMo turns (one session per LoCoMo session) and
    one source document."""
    Memory.open(root, create=True).close()
    config = root / "airsspec.toml"
    edit_config(config, ('embedder = "minilm"', f'embedder = "{embedder}"'))
    memory = Memory.open(root)
    conversation = json.loads(LOCOMO.read_text())[0]["conversation"]
    speaker = conversation["speaker_a"]
    left = records
    for key in sorted((k for k in conversation if k.split("_")[-1].isdigit()), key=len):
        turns = conversation[key][:left]
        events = [
            {
                "type": "user" if t["speaker"] == speaker else "assistant",
                "content": t["text"],
                "meta": {"dia_id": t["dia_id"]},
            }
            for t in turns
        ]
        memory.append_many(key.replace("_", "-"), events)
        left -= len(turns)
        if left <= 0:
            break
    sources = memory.workspace.sources_dir
    sources.mkdir(parents=True, exist_ok=True)
    (sources / "notes.md").write_text("# Notes\n\nThe retry budget is three attempts.\n" * 40)
    return memory


def cold_rows(memory: Memory) -> list[dict]:
    """The cold table, sorted by unit id."""
    table = memory.workspace.projectors(("cold",))[0].store.open()
    assert table is not None
    return table.to_arrow().sort_by("unit_id").to_pylist()


def data_versions(memory: Memory) -> list[int]:
    """The versions of the cold table at which its row count changed."""
    import lance

    uri = memory.workspace.projectors(("cold",))[0].store.directory / "units.lance"
    dataset = lance.dataset(str(uri))
    counts = [
        (v["version"], dataset.checkout_version(v["version"]).count_rows())
        for v in dataset.versions()
    ]
    return [v for (v, n), (_, before) in zip(counts[1:], counts, strict=False) if n != before]


@pytest.fixture
def cluster(ray_enabled: None):
    """A two-node loopback Ray cluster (one CPU each), shut down after, nothing left running."""
    from ray.cluster_utils import Cluster

    before = set(children(os.getpid()))
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    made.add_node(num_cpus=1)
    try:
        yield made
    finally:
        made.shutdown()
        assert wait_for(lambda: not set(children(os.getpid())) - before, 30), "Ray left running"


def assert_same_tables(local: list[dict], distributed: list[dict], atol: float = 0.0) -> None:
    assert [r["unit_id"] for r in local] == [r["unit_id"] for r in distributed]
    for a, b in zip(local, distributed, strict=True):
        va, vb = a.pop("vector"), b.pop("vector")
        assert a == b
        assert (va is None) == (vb is None)
        if va is not None:
            np.testing.assert_allclose(np.array(va), np.array(vb), atol=atol, rtol=0)


@pytest.mark.ray
def test_ray_rebuild_equals_local_rebuild_in_one_version(tmp_path: Path, cluster) -> None:
    memory = make_workspace(tmp_path, "hash", 300)
    memory.rebuild("cold", jobs=2)
    local = cold_rows(memory)
    assert len(local) > 300  # every turn plus the document's chunks

    [report] = memory.rebuild("cold", engine="ray", address=cluster.address)
    assert report.applied == 300 + 1  # the turns and the document's registration
    assert_same_tables(local, cold_rows(memory))
    assert data_versions(memory) == [2]  # created empty at 1, every row in one commit

    # The checkpoints are the local rebuild's: an incremental run folds only what is new.
    memory.append("session-1", {"type": "user", "content": "and the retry budget?"})
    reports = memory.project("cold")
    assert reports[0].applied == 1 and not reports[0].rebuilt
    assert len(cold_rows(memory)) == len(local) + 1


@pytest.mark.ray
@pytest.mark.slow
def test_ray_rebuild_with_minilm_equals_local(tmp_path: Path, cluster) -> None:
    memory = make_workspace(tmp_path, "minilm", 60)
    if memory.embedder_problem():
        pytest.skip(f"MiniLM is unavailable: {memory.embedder_problem()}")
    memory.rebuild("cold")
    local = cold_rows(memory)
    # The actors embed afresh (no cache), then fill the cache.
    cache = memory.workspace.state_dir / "caches" / "embeddings.sqlite"
    shutil.rmtree(cache.parent)
    memory.rebuild("cold", engine="ray", address=cluster.address)
    assert_same_tables(local, cold_rows(memory), atol=1e-5)
    assert cache.is_file()


def test_engine_ray_without_the_extra_is_one_error_line(tmp_path: Path) -> None:
    Memory.open(tmp_path, create=True).close()
    hide = "import sys; sys.modules['ray'] = None; sys.modules['lance'] = None; "
    run = "from airsspec.cli import main; sys.exit(main())"
    args = [
        "--config",
        str(tmp_path / "airsspec.toml"),
        "rebuild",
        "--tier",
        "cold",
        "--engine",
        "ray",
    ]
    done = subprocess.run(
        [sys.executable, "-c", hide + run, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("airsspec: error:"), done.stderr
    assert "[ray]" in lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["--address", "127.0.0.1:6379"],
        ["--engine", "ray", "--as-of", "3", "--out", "past"],
    ],
)
def test_ray_options_out_of_place_are_one_error_line(tmp_path: Path, args: list[str]) -> None:
    Memory.open(tmp_path, create=True).close()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    done = run_cli("rebuild", "--tier", "cold", *args, cwd=tmp_path)
    assert done.returncode != 0
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("airsspec: error:"), lines
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing was rebuilt

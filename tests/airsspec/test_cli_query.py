"""The query command: text, --json and --batch output; bad batch input exits 2 and changes
nothing; a SIGKILLed cold projection resumes to the rows of a clean rebuild."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airsspec import Memory
from projections.cold import ColdStore
from projections.embedders import HashEmbedder
from tests.conftest import REPO, init_workspace, kill_runs_at_random, snapshot
from tests.support.cli import run_cli
from tests.support.logs import write_synthetic_log

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


@pytest.fixture
def example(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    contexts = tmp_path / ".airsspec" / "contexts"
    shutil.copytree(REPO / ".airsspec-example" / "contexts", contexts, dirs_exist_ok=True)
    return tmp_path


@pytest.mark.slow
def test_query_brings_the_tier_up_to_date_and_answers(example: Path) -> None:
    shown = run_cli("query", "why were users logged out early", "-k", "2", cwd=example)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout.decode()
    assert out.startswith("2 hit(s) for 'why were users logged out early' (hybrid")
    assert "bugfix-login-timeout #1" in out
    as_json = run_cli("query", "HMAC", "--session", "spec-webhooks", "--json", cwd=example)
    result = json.loads(as_json.stdout)
    assert result["mode"] == "hybrid" and result["degraded"] is False
    assert result["hits"] and {h["session"] for h in result["hits"]} == {"spec-webhooks"}
    status = json.loads(run_cli("status", "--json", cwd=example).stdout)
    (cold,) = [t for t in status["tiers"] if t["tier"] == "cold"]
    assert cold["lag_records"] == 0


def test_batch_gives_one_result_line_per_query_line(example: Path) -> None:
    batch = example / "q.jsonl"
    batch.write_text(
        '{"query": "HMAC signing", "k": 2}\n\n'
        '{"query": "retention", "k": 1, "kinds": ["message"]}\n'
        '{"query": "CSV export", "session": "spec-csv-export"}\n'
    )
    done = run_cli("query", "--batch", str(batch), cwd=example, env=HASH)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["query"] for r in results] == ["HMAC signing", "retention", "CSV export"]
    assert [len(r["hits"]) for r in results[:2]] == [2, 1]
    assert {h["session"] for h in results[2]["hits"]} == {"spec-csv-export"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('{"query": "ok"}\n{"query": \n', "q.jsonl:2: invalid JSON"),
        ('{"query": "ok", "kk": 3}\n', "q.jsonl:1: field 'kk': Extra inputs are not permitted"),
        ('{"query": "ok", "k": 0}\n', "q.jsonl:1: field 'k': Input should be greater than"),
        ('{"k": 3}\n', "q.jsonl:1: field 'query': Field required"),
        # only one of the two could be asked: neither is chosen silently
        ('{"query": "ok", "query": "other"}\n', "q.jsonl:1: key 'query' is given twice"),
        # a value of another type is refused, not converted (2.0, "2" and true are no count)
        ('{"query": "ok", "k": 2.0}\n', "q.jsonl:1: field 'k': Input should be a valid integer"),
        ('{"query": "ok", "k": "2"}\n', "q.jsonl:1: field 'k': Input should be a valid integer"),
        ('{"query": "ok", "k": true}\n', "q.jsonl:1: field 'k': Input should be a valid integer"),
        (
            '{"query": "ok", "detail": "yes"}\n',
            "q.jsonl:1: field 'detail': Input should be a valid boolean",
        ),
        ('["ok"]\n', "q.jsonl:1: a query must be a JSON object"),
    ],
)
def test_bad_batch_input_exits_2_and_changes_nothing(example: Path, lines, message) -> None:
    (example / "q.jsonl").write_text(lines)
    before = snapshot(example)
    done = run_cli("query", "--batch", "q.jsonl", cwd=example, env=HASH)
    assert done.returncode == 2
    assert message in done.stderr.decode()
    assert snapshot(example) == before  # not even the cold tier was brought up to date


def test_query_needs_text_or_batch(example: Path) -> None:
    done = run_cli("query", cwd=example)
    assert done.returncode == 2 and b"give either a query TEXT or --batch" in done.stderr


def _rows(vectors: Path) -> list[dict]:
    table = ColdStore(vectors, HashEmbedder().model_id, 256).open()
    assert table is not None
    return table.to_arrow().drop_columns(["content_hash"]).sort_by("unit_id").to_pylist()


@pytest.mark.slow
def test_sigkilled_cold_projection_resumes_to_the_rows_of_a_rebuild(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    log_dir = tmp_path / ".airsspec" / "contexts" / "agent"
    write_synthetic_log(log_dir, sessions=50, per_session=150, content="deploy the parser " * 6)
    versions = tmp_path / ".airsspec" / "knowledge" / "vectors" / "units.lance" / "_versions"
    kills = kill_runs_at_random(  # each run killed after 2-8 commits to the table
        "project", "--tier", "cold", cwd=tmp_path, runs=5, delay=(2, 8), seed=5, env=HASH,
        progress=lambda: len(list(versions.glob("*.manifest"))) if versions.exists() else 0,
    )  # fmt: skip
    assert kills >= 3, f"only {kills} of 5 runs were killed mid-projection"
    finished = run_cli("project", "--tier", "cold", cwd=tmp_path, env=HASH)
    assert finished.returncode == 0, finished.stderr
    clean = tmp_path / "clean"
    rebuilt = run_cli(
        "rebuild", "--tier", "cold", "--as-of", "2100-01-01T00:00:00Z", "--out", str(clean),
        cwd=tmp_path, env=HASH,
    )  # fmt: skip
    assert rebuilt.returncode == 0, rebuilt.stderr
    live = _rows(tmp_path / ".airsspec" / "knowledge" / "vectors")
    assert len(live) == 50 * 150
    assert live == _rows(clean / "knowledge" / "vectors")


@pytest.mark.slow
def test_two_concurrent_cold_projections_write_each_row_once(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    log_dir = tmp_path / ".airsspec" / "contexts" / "agent"
    write_synthetic_log(log_dir, sessions=30, per_session=100, content="deploy the parser " * 4)
    command = [sys.executable, "-m", "airsspec", "project", "--tier", "cold"]
    env = {**os.environ, **HASH}
    runs = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE) for _ in range(2)
    ]
    for run in runs:
        assert run.wait(timeout=120) == 0, run.stderr.read()
    rows = _rows(tmp_path / ".airsspec" / "knowledge" / "vectors")
    assert len(rows) == len({r["unit_id"] for r in rows}) == 30 * 100


@pytest.mark.slow
@pytest.mark.parametrize("command", [["query", "zebra crossing"], ["project"], ["rebuild"]])
def test_a_corrupt_embedding_cache_is_set_aside_and_rebuilt(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    Memory.init(tmp_path)
    with Memory.open(tmp_path) as memory:  # a projected session (made here: not what is tested)
        memory.append("s", {"type": "user", "content": "the zebra crossing by the school"})
        memory.project()
    del memory
    gc.collect()  # its cache connection closed (a process's exit would), before the damage
    cache = tmp_path / ".airsspec" / "state" / "caches" / "embeddings.sqlite"
    for extra in cache.parent.glob("embeddings.sqlite-*"):
        extra.unlink()
    cache.write_bytes(b"this is not a database" * 100)
    with Memory.open(tmp_path) as memory:
        memory.append("s", {"type": "user", "content": "a second zebra crossing downtown"})
    result = run_cli(*command, cwd=tmp_path, env=HASH)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    assert b"embedding cache" in result.stderr and b"set aside" in result.stderr
    assert list(cache.parent.glob("embeddings.sqlite.corrupt-*"))
    found = run_cli("query", "zebra crossing", "--json", cwd=tmp_path, env=HASH)
    assert len(json.loads(found.stdout)["hits"]) == 2

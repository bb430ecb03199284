"""project, hot, status and rebuild as a user runs them, on a copy of the example workspace.
The cold tier embeds with the hash embedder: what is tested is the commands, not the model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, init_workspace, snapshot
from tests.support.cli import run_cli as _run_cli

pytestmark = pytest.mark.slow  # each test projects the example workspace's every tier


def run_cli(*args: str, **kw):
    return _run_cli(*args, env={"AIRSSPEC_COLD_EMBEDDER": "hash"}, **kw)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    shutil.copytree(
        REPO / ".airsspec-example" / "contexts",
        tmp_path / ".airsspec" / "contexts",
        dirs_exist_ok=True,
    )
    return tmp_path


def test_status_shows_lag_until_projected(project: Path) -> None:
    before = json.loads(run_cli("status", "--json", cwd=project).stdout)
    assert [t["tier"] for t in before["tiers"]] == [
        "hot",
        "warm",
        "tokens",
        "learnings",
        "memory_files",
        "cold",
        "visual",
    ]
    assert all(t["lag_records"] == before["log"]["records"] == 379 for t in before["tiers"])
    result = run_cli("project", cwd=project)
    assert result.returncode == 0 and b"hot: 379 record(s) applied" in result.stdout
    after = json.loads(run_cli("status", "--json", cwd=project).stdout)
    assert all(t["lag_records"] == 0 for t in after["tiers"]) and after["degraded"] == []
    new_event = b'{"type": "user", "content": "One more thing."}\n'
    run_cli("append", "spec-webhooks", "-", cwd=project, stdin=new_event)
    lagging = {
        t["tier"]: t for t in json.loads(run_cli("status", "--json", cwd=project).stdout)["tiers"]
    }
    assert lagging.pop("hot")["lag_records"] == 0  # append brings the hot window along
    assert all(t["lag_records"] == 1 for t in lagging.values())
    assert lagging["warm"]["behind_sessions"] == ["spec-webhooks"]


def test_hot_shows_the_window_and_prompt_text(project: Path) -> None:
    run_cli("project", cwd=project)
    window = json.loads(run_cli("hot", "spec-webhooks", "--json", cwd=project).stdout)
    assert len(window["entries"]) == 30
    uncovered = window["overflow"] + window["entries"]
    assert window["overflow"] and window["tokens"] == sum(e["tokens"] for e in uncovered)
    assert window["entries"][-1]["seq"] == 112 and window["checkpoint"]["seq"] == 112
    readable = run_cli("hot", "spec-webhooks", cwd=project).stdout.decode()
    assert readable.startswith("spec-webhooks: 30 message(s)")
    prompt = run_cli("hot", "spec-webhooks", "--budget", "50", cwd=project).stdout.decode()
    assert prompt.strip().endswith("All 12 tasks are done and tested; nothing is open.")
    missing = run_cli("hot", "no-such-session", cwd=project)
    assert missing.returncode == 2 and b"no session" in missing.stderr


def test_rebuild_restores_deleted_tier_exactly(project: Path) -> None:
    run_cli("project", cwd=project)
    hot_dir = project / ".airsspec" / "state" / "hot"
    before = snapshot(hot_dir)
    shutil.rmtree(project / ".airsspec" / "state")
    assert run_cli("rebuild", "--tier", "hot", cwd=project).returncode == 0
    assert snapshot(hot_dir) == before
    shutil.rmtree(hot_dir)
    assert run_cli("project", cwd=project).returncode == 0  # a plain catch-up restores it too
    assert snapshot(hot_dir) == before


def test_rebuild_as_of_writes_elsewhere(project: Path) -> None:
    run_cli("project", cwd=project)
    live = snapshot(project / ".airsspec" / "state")
    out = project / "past"
    result = run_cli("rebuild", "--as-of", "5", "--out", str(out), "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["as_of"] == "5"
    past = json.loads((out / "state" / "hot" / "spec-webhooks.json").read_bytes())
    assert [e["seq"] for e in past["entries"]] == [1, 2, 3, 4, 5]
    assert snapshot(project / ".airsspec" / "state") == live
    inside = run_cli(
        "rebuild", "--as-of", "5", "--out", str(project / ".airsspec" / "x"), cwd=project
    )
    assert inside.returncode == 2 and b"inside the workspace" in inside.stderr
    bad = run_cli("rebuild", "--as-of", "yesterday", "--out", str(out), cwd=project)
    assert bad.returncode == 2 and b"--as-of" in bad.stderr
    tab = project / "a\tb"  # a folder Lance cannot keep a table in: refused before any tier
    refused = run_cli("rebuild", "--as-of", "5", "--out", str(tab), cwd=project)
    assert refused.returncode == 2 and b"control character" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and not tab.exists()


def test_compact_says_what_it_made_in_words_that_agree_with_its_counts(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    said = "".join(f'{{"type": "user", "content": "message {i}"}}\n' for i in range(4))
    assert run_cli("append", "s1", cwd=tmp_path, stdin=said.encode()).returncode == 0
    done = run_cli("compact", "--force", "s1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stdout.decode()
    assert "(2 messages, 1 chunk, extractive)" in line, line  # not "1 chunks"

"""One damaged session never takes the others down: sessions, project, query, library and sql
still answer for the rest and name the damaged one (project exits 1: a check failed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import init_workspace
from tests.support.cli import run_cli

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damaged")
    init_workspace(root)
    for name in ("a", "b", "c"):
        lines = "".join(
            json.dumps({"type": "user", "content": f"{name} walrus message {i}"}) + "\n"
            for i in range(5)
        )
        assert run_cli("append", name, cwd=root, stdin=lines.encode()).returncode == 0
    log = root / ".airsspec" / "contexts" / "agent" / "b.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join([*lines[:2], b'{"this is": not json\n', *lines[3:]]))
    (log.parent / "d.jsonl").write_bytes(b"not a record at all\n")  # a stray file
    return root


def test_project_skips_the_damaged_session_and_says_so(project: Path) -> None:
    result = run_cli("project", cwd=project, env=HASH)
    assert result.returncode == 1
    assert b"Traceback" not in result.stderr
    assert b"skipped b:" in result.stderr and b"b.jsonl" in result.stderr
    assert b"skipped d:" in result.stderr
    hot = project / ".airsspec" / "state" / "hot"
    assert (hot / "a.json").is_file() and (hot / "c.json").is_file()


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (
            ["sessions", "--json"],
            lambda out: (
                {s["session"]: bool(s["problem"]) for s in out}
                == {"a": False, "b": False, "c": False, "d": True}
            ),
        ),
        (
            ["query", "walrus", "-k", "10", "--json"],
            lambda out: {h["session"] for h in out["hits"]} == {"a", "c"},
        ),
        (["library", "--json"], lambda out: out == []),
        (
            ["sql", "SELECT DISTINCT session FROM events ORDER BY 1", "--json"],
            lambda out: [r["session"] for r in out] == ["a", "c"],
        ),
    ],
    ids=["sessions", "query", "library", "sql"],
)
def test_the_other_sessions_still_answer(project: Path, args: list[str], answer) -> None:
    result = run_cli(*args, cwd=project, env=HASH)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    assert answer(json.loads(result.stdout))
    if args[0] in ("query", "sql"):
        assert b"b" in result.stderr and b"warning" in result.stderr
    if args[0] == "sql":
        assert b"left out b.jsonl" in result.stderr and b"left out d.jsonl" in result.stderr

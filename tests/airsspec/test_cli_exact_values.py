"""A value is stored exactly as given or refused, never changed: integers beyond 64 bits, NaN
and deep nesting are refused with one line naming the file and line; the edges of the range
are kept to the digit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli

BIG = "18446744073709551616"  # 2**64: orjson alone would read it as 1.8446744073709552e+19


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    assert (
        run_cli("append", "s", cwd=tmp_path, stdin=b'{"type":"user","content":"x"}').returncode == 0
    )
    return tmp_path


@pytest.mark.parametrize(
    "line",
    [
        '{"type": "user", "content": "x", "meta": {"n": BIG}}',
        '{"type": "action", "tool": "t", "params": {"n": [1, -BIG]}}',
        '{"type": "observation", "result": 9999999999999999999999999999999999999999}',
    ],
)
def test_an_integer_beyond_64_bits_is_refused_not_rounded(project: Path, line: str) -> None:
    before = snapshot(project)
    result = run_cli("append", "s", cwd=project, stdin=line.replace("BIG", BIG).encode())
    assert result.returncode == 2
    assert b"<stdin>:1:" in result.stderr and b"does not fit in 64 bits" in result.stderr
    assert snapshot(project) == before


def test_the_edges_of_the_range_are_kept_to_the_digit(project: Path) -> None:
    edges = '"hi": 18446744073709551615, "lo": -9223372036854775808'
    line = '{"type": "user", "content": "x", "meta": {' + edges + "}}"
    assert run_cli("append", "s", cwd=project, stdin=line.encode()).returncode == 0
    stored = (project / ".airsspec/contexts/agent/s.jsonl").read_bytes().splitlines()[-1]
    assert b'"hi":18446744073709551615' in stored and b'"lo":-9223372036854775808' in stored
    assert run_cli("verify", cwd=project).returncode == 0


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("claude-code", '{"type": "user", "uuid": "u", "n": ' + BIG + "}\n"),
        ("openhands", '[{"id": 1, "source": "user", "message": "hi", "x": NaN}]'),
        ("openhands", "[" * 5000 + "]" * 5000),
    ],
)
def test_imports_refuse_values_they_cannot_keep(project: Path, fmt: str, text: str) -> None:
    source = project / ("t.jsonl" if fmt == "claude-code" else "t.json")
    source.write_text(text)
    before = snapshot(project / ".airsspec")
    result = run_cli("import", fmt, str(source), cwd=project)
    assert result.returncode == 2, result.stdout
    assert b"Traceback" not in result.stderr
    assert b"airsspec: error: " + str(source).encode() in result.stderr
    assert snapshot(project / ".airsspec") == before
    json.dumps(text[:10])  # the source itself is untouched

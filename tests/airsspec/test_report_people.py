"""``report`` as a person reads it: a table's numbers right-aligned, fractions to two decimals,
times to the second; and ``report tokens --plot`` draws each session in a colour of its own,
however many there are (matplotlib's cycle repeats after ten)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airsspec.memory import Memory
from tests.support.cli import run_cli

pytest.importorskip("matplotlib", reason="report --plot needs matplotlib (the plot extra)")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path / "ws", create=True) as memory:
        for n in range(14):
            call = {"type": "action", "id": f"c{n}", "tool": "bash", "params": {"n": n}}
            answer = {"type": "observation", "action_id": f"c{n}", "result": "ok"}
            answer["is_error"] = n % 3 == 0
            memory.append_many(f"s{n:02d}", [call, answer])
        return memory.root


def test_a_report_table_aligns_numbers_and_rounds_fractions(workspace: Path) -> None:
    done = run_cli("-w", str(workspace), "report", "tools", cwd=workspace)
    assert done.returncode == 0, done.stderr
    header, rule, row, *_ = done.stdout.decode().splitlines()
    assert header.split() == [
        "tool",
        "calls",
        "errors",
        "error_pct",
        "median_latency_s",
        "unanswered",
    ]
    assert row.split()[:4] == ["bash", "14", "5", "35.70"]
    assert len(row) == len(rule)  # the last column right-aligned to its rule
    sessions = run_cli("-w", str(workspace), "report", "sessions", cwd=workspace).stdout.decode()
    times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\S*)", sessions)
    assert times and set(times) == {""}  # to the second, no fraction or offset


def test_each_session_of_a_tokens_chart_has_its_own_colour(workspace: Path) -> None:
    chart = workspace.parent / "tokens.svg"
    done = run_cli("-w", str(workspace), "report", "tokens", "--plot", str(chart), cwd=workspace)
    assert done.returncode == 0, done.stderr
    svg = chart.read_text(encoding="utf-8")
    legend = re.findall(r"<!-- (s\d\d) -->", svg)
    strokes = re.findall(
        r'<g id="line2d_\d+">\s*<path [^>]*style="[^"]*stroke: (#[0-9a-f]{6})', svg
    )
    assert len(set(legend)) == 14
    assert len(set(strokes)) >= 14  # fourteen series, fourteen colours

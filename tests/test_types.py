"""The packages type-check: mypy, as ``[tool.mypy]`` in pyproject.toml configures it, finds no
error (``make lint`` runs it too), and checks a call of the facade or of an async twin against
the service's parameters (wrong calls found, right ones not)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("mypy", reason="mypy is in the dev extra: pip install -e '.[dev]'")


def _mypy(*files: Path) -> subprocess.CompletedProcess[str]:
    """mypy as pyproject configures it, on ``files`` (none: the packages). The tests of this
    module run in order in one process: the first checks the packages and leaves its cache,
    and the probes after it, which import the packages, read them from that cache."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", *map(str, files)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


@pytest.mark.slow
def test_mypy_finds_no_error() -> None:
    result = _mypy()
    assert result.returncode == 0, result.stdout[-4000:]


@pytest.mark.slow
def test_mypy_checks_a_call_of_the_facade_against_the_service(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from airsspec.memory import AsyncMemory, Memory\n"
        "async def calls(memory: Memory, twin: AsyncMemory) -> None:\n"
        "    reveal_type(memory.search)\n"
        "    memory.search('q', k='3')\n"
        "    memory.hot(1)\n"
        "    reveal_type(await twin.replay('s1'))\n"
        "    await twin.sessions.start('s1', task=2)\n"
        "    memory.replay('s1', from_seq=2)\n",
        encoding="utf-8",
    )
    result = _mypy(probe)
    lines = [line.partition(":")[2] for line in result.stdout.splitlines()]
    assert '3: note: Revealed type is "def (query: str, *, k: int =' in "\n".join(lines)
    errors = sorted(int(line.split(":")[0]) for line in lines if ": error:" in line)
    assert errors == [4, 5, 7], result.stdout  # the wrong calls, and only those
    assert 'Argument "k" has incompatible type "str"; expected "int"' in result.stdout
    assert "list[Any]" in result.stdout  # replay's iterator, read to a list


@pytest.mark.slow
def test_mypy_sees_a_twin_s_made_calls_with_the_target_s_parameters(tmp_path: Path) -> None:
    """The calls a twin makes at run time are the plugin's to type (``airsspec.mypy_plugin``,
    in pyproject's ``[tool.mypy] plugins``): the target's parameters, a coroutine's result,
    and an error for a name the target has no call of."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from airsspec.memory import AsyncMemory\n"
        "async def calls(twin: AsyncMemory) -> None:\n"
        "    reveal_type(twin.learnings.add)\n"
        "    reveal_type(await twin.files.view('/memories'))\n"
        "    await twin.learnings.add(3)\n"
        "    await twin.learnings.nothing_such()\n"
        "    await twin.files.delete('/memories/a', actor=2)\n"
        "    reveal_type(await twin.status())\n",
        encoding="utf-8",
    )
    result = _mypy(probe)
    lines = [line.partition(":")[2] for line in result.stdout.splitlines()]
    notes = "\n".join(lines)
    assert '3: note: Revealed type is "def (text: str, *, kind: str =' in notes, result.stdout
    assert "-> typing.Coroutine[Any, Any, eventlog.schema.records.LearningRecord]" in notes
    assert '4: note: Revealed type is "str"' in notes  # view's, awaited
    errors = sorted(int(line.split(":")[0]) for line in lines if ": error:" in line)
    assert errors == [5, 6, 7], result.stdout  # the wrong calls, and only those
    assert 'Argument 1 to "add" of "Learnings" has incompatible type "int"' in result.stdout
    assert '"AsyncLearnings" has no attribute "nothing_such"  [attr-defined]' in result.stdout
    assert '8: note: Revealed type is "list[projections.status.TierStatus]"' in notes

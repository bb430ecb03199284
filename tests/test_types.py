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


def _probe(folder: Path, *lines: str) -> tuple[str, str, list[int]]:
    """mypy on a module of ``lines``: its output, the output's lines without the file's name,
    and the numbers of the lines with an error."""
    probe = folder / "probe.py"
    probe.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    out = _mypy(probe).stdout
    found = [line.partition(":")[2] for line in out.splitlines()]
    errors = sorted(int(line.split(":")[0]) for line in found if ": error:" in line)
    return out, "\n".join(found), errors


@pytest.mark.slow
def test_mypy_finds_no_error() -> None:
    result = _mypy()
    assert result.returncode == 0, result.stdout[-4000:]


@pytest.mark.slow
def test_mypy_checks_a_call_of_the_facade_against_the_service(tmp_path: Path) -> None:
    out, notes, errors = _probe(
        tmp_path,
        "from airsspec.memory import AsyncMemory, Memory",
        "async def calls(memory: Memory, twin: AsyncMemory) -> None:",
        "    reveal_type(memory.search)",
        "    memory.search('q', k='3')",
        "    memory.hot(1)",
        "    reveal_type(await twin.replay('s1'))",
        "    await twin.sessions.start('s1', task=2)",
        "    memory.replay('s1', from_seq=2)",
    )
    assert '3: note: Revealed type is "def (query: str, *, k: int =' in notes
    assert errors == [4, 5, 7], out  # the wrong calls, and only those
    assert 'Argument "k" has incompatible type "str"; expected "int"' in out
    assert "list[Any]" in out  # replay's iterator, read to a list


@pytest.mark.slow
def test_mypy_sees_a_twin_s_made_calls_with_the_target_s_parameters(tmp_path: Path) -> None:
    """The calls a twin makes at run time are the plugin's to type (``airsspec.mypy_plugin``,
    in pyproject's ``[tool.mypy] plugins``): the target's parameters, a coroutine's result,
    and an error for a name the target has no call of."""
    out, notes, errors = _probe(
        tmp_path,
        "from airsspec.memory import AsyncMemory",
        "async def calls(twin: AsyncMemory) -> None:",
        "    reveal_type(twin.learnings.add)",
        "    reveal_type(await twin.files.view('/memories'))",
        "    await twin.learnings.add(3)",
        "    await twin.learnings.nothing_such()",
        "    await twin.files.delete('/memories/a', actor=2)",
        "    reveal_type(await twin.status())",
    )
    assert '3: note: Revealed type is "def (text: str, *, kind: str =' in notes, out
    assert "-> typing.Coroutine[Any, Any, eventlog.schema.records.LearningRecord]" in notes
    assert '4: note: Revealed type is "str"' in notes  # view's, awaited
    assert errors == [5, 6, 7], out  # the wrong calls, and only those
    assert 'Argument 1 to "add" of "Learnings" has incompatible type "int"' in out
    assert '"AsyncLearnings" has no attribute "nothing_such"  [attr-defined]' in out
    assert '8: note: Revealed type is "list[projections.status.TierStatus]"' in notes

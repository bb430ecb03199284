"""The packages type-check: mypy, as ``[tool.mypy]`` in pyproject.toml configures it, finds no
error (``make test`` runs it before the tests too; this keeps a plain ``pytest`` honest)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_mypy_finds_no_error() -> None:
    pytest.importorskip("mypy", reason="mypy is in the dev extra: pip install -e '.[dev]'")
    result = subprocess.run(
        [sys.executable, "-m", "mypy"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:]

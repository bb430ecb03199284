"""The agent frameworks' examples of ``docs/integrations.md`` run as written: each ```python
block under a framework's heading, in a fresh folder, prints what the document says it prints
(a block whose first line says it is not run, because it calls a paid API, is left out)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

DOC = REPO / "docs" / "integrations.md"
BLOCK = re.compile(r"^## (.+?)$|^```python\n(.*?)^```$", re.S | re.M)
NOT_RUN = "not run by the README test"
PRINTS = {  # what each framework's example prints (its last line)
    "OpenAI Agents SDK": [{"content": "My order is late", "role": "user"}],
    "LangGraph": {"count": 2},
}


def _examples() -> list[tuple[str, str]]:
    heading, found = "", []
    for title, body in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        heading = title.split(":")[0] if title else heading
        if body and NOT_RUN not in body[:200]:
            found.append((heading, body))
    return found


def test_each_framework_has_an_example() -> None:
    headings = [heading for heading, _ in _examples()]
    assert all(headings.count(heading) == 1 for heading in PRINTS), headings


@pytest.mark.slow
@pytest.mark.parametrize("heading", list(PRINTS))
def test_the_example_runs_and_prints_what_the_document_says(heading: str, tmp_path: Path) -> None:
    pytest.importorskip({"LangGraph": "langgraph", "OpenAI Agents SDK": "agents"}[heading])
    body = dict(_examples())[heading]
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRSSPEC_COLD_EMBEDDER": "hash"}
    done = subprocess.run(
        [sys.executable, "-c", body],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert ast.literal_eval(done.stdout.strip().splitlines()[-1]) == PRINTS[heading]

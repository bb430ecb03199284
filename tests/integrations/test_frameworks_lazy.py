"""The framework adapters are optional extras: importing airsspec, its facade or the
integrations package loads no agent framework (each loads only with its own module)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

FRAMEWORKS = ("agents", "langgraph", "langchain_core")


def _loaded_after(statement: str) -> set[str]:
    probe = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    return {name.split(".")[0] for name in done.stdout.split()}


def test_the_core_imports_no_agent_framework() -> None:
    loaded = _loaded_after("import airsspec, airsspec.memory, airsspec.integrations")
    assert loaded.isdisjoint(FRAMEWORKS), loaded & set(FRAMEWORKS)


def test_each_adapter_loads_its_own_framework_only() -> None:
    loaded = _loaded_after("import airsspec.integrations.openai_agents")
    assert "agents" in loaded and "langgraph" not in loaded

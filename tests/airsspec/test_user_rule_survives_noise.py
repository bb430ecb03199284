"""A rule the user wrote stays in a new session's context after real, noisy sessions were
imported, extracted and read many times: their learnings never outrank it."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec import Memory
from eventlog.importers import ImportOptions, import_paths

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "claude-code"
RULE = "Never use default exports; use named exports."
pytestmark = pytest.mark.skipif(
    not DATA.exists(), reason=f"the real Claude Code transcripts are not here ({DATA})"
)


def _noisy_sessions(memory: Memory) -> list[str]:
    """Five real transcripts: four dev ones, and one of them again under another name (so what
    it teaches is seen in two sessions)."""
    log = memory.workspace.log
    sources = [
        DATA / "short.jsonl",
        DATA / "tool_heavy.jsonl",
        DATA / "subagent.jsonl",
        *sorted((DATA / "compact").glob("*.jsonl")),
    ]
    results = import_paths(log, "claude-code", sources)
    results += import_paths(
        log, "claude-code", [DATA / "subagent.jsonl"], ImportOptions(prefix="again-")
    )
    return [r.session for r in results]


@pytest.mark.slow
def test_a_user_rule_stays_in_a_new_sessions_context_after_five_noisy_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with Memory.open(tmp_path, create=True) as memory:
        sessions = _noisy_sessions(memory)
        assert len(sessions) == 5
        for session in sessions:
            memory.learnings.extract(session, force=True)
        learned = [a for a in memory.learnings.list().learnings if a.source != "user"]
        assert learned  # the imports did teach something
        memory.learnings.add(RULE, kind="correction")  # the newest, and never read yet
        for _ in range(3):  # every imported session read back: their learnings gain accesses
            for session in sessions:
                memory.context(session, budget=2000, query="LiveView tests sandbox git push")
        memory.sessions.start("next", task="push the branch and fix the LiveView sandbox tests")
        for budget in (800, 2000):
            text = memory.context("next", budget=budget)
            assert isinstance(text, str) and RULE in text, (budget, text)
        order = memory.learnings.list(reader="next").prompt_order()
        assert order[0].text == RULE

"""The example workspace (``.airsspec-example/``: six sessions of an agent writing specs and
code, with tool calls, their output and its thoughts) projected for recall, and questions about
it whose answers are known: which passages of which session say it. They measure retrieval on
an agent's coding history, beside the chat benchmarks (bench/generalise.py)."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from airsspec.memory import Memory
from airsspec.workspace import Workspace, init_workspace
from eventlog.errors import NothingToCompactError
from tests.conftest import REPO

SETTINGS = """
[memory]
hot_window_size = 12
chunk_size = 3
[compactor]
summarizer = "extractive"
[cold]
embedder = "{embedder}"
"""
SPEC = "# Retention\nAudit entries are kept for 400 days.\n\n# Export\nExports are CSV, in UTC.\n"


def example_workspace(root: Path, embedder: str) -> Workspace:
    """The example's sessions under ``root``, each compacted, with one spec document, every
    tier projected (``embedder``: "minilm" for real recall, "hash" for a fast one)."""
    init_workspace(root)
    (root / "airsspec.toml").write_text(SETTINGS.format(embedder=embedder))
    ws = Workspace.open(config=root / "airsspec.toml")
    shutil.copytree(
        REPO / ".airsspec-example" / "contexts", ws.root / "contexts", dirs_exist_ok=True
    )
    (ws.sources_dir / "audit-spec.md").write_text(SPEC)
    for session in ws.log.sessions():
        with contextlib.suppress(NothingToCompactError):
            ws.compactor().compact(session, force=True)
    Memory(ws).project()  # registers the document, then catches every tier up
    return ws


@dataclass(frozen=True)
class Question:
    """A question about the example's work and the messages that answer it (their session and
    seqs: the user's request, the agent's finding or decision, the fix it reported)."""

    text: str
    session: str
    seqs: frozenset[int]

    def answers(self, session: str | None, seq_from: int | None, seq_to: int | None) -> bool:
        """Whether a hit (its session and seq range; a summary's covers several) holds an
        answer."""
        if session != self.session or seq_from is None or seq_to is None:
            return False
        return any(seq_from <= seq <= seq_to for seq in self.seqs)


def _q(text: str, session: str, *seqs: int) -> Question:
    return Question(text, session, frozenset(seqs))


QUESTIONS = (
    _q("why were users logged out after five minutes?", "bugfix-login-timeout", 1, 6, 7, 17),
    _q("how long are audit entries kept?", "spec-audit-log", 7, 8, 49, 56, 61, 62),
    _q("what happens if Redis is down?", "spec-rate-limiter", 90, 91, 92),
    _q("which window algorithm does the rate limiter use?", "spec-rate-limiter", 13, 14, 17),
    _q("how are webhook deliveries signed?", "spec-webhooks", 7, 8, 25, 32, 37, 38),
    _q("what is the retry schedule for webhook deliveries?", "spec-webhooks", 7, 8, 55, 62),
    _q("what column order does finance need in the CSV export?", "spec-csv-export", 43, 50),
    _q("how are JPY amounts formatted in the export?", "spec-csv-export", 27, 32),
    _q("what time zone are exports in?", "review-release-specs", 17, 20),
    _q("what task is still open for the rate limiter?", "spec-rate-limiter", 95, 96),
    _q("why did the Lua script fail for a new key?", "spec-rate-limiter", 43, 48),
    _q("how does the CSV export handle 100k invoices?", "spec-csv-export", 1, 6, 11, 50),
    _q("who may edit audit entries?", "spec-audit-log", 7, 8),
    _q("what bug did the retention job have?", "spec-audit-log", 56, 61),
    _q("what was wrong with the HMAC signature?", "spec-webhooks", 32, 37),
)
"""Fifteen questions about the example's sessions, each answered by one of them."""

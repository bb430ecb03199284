"""After ``forget``, nothing a forgotten user wrote is left in the clear anywhere under the
workspace: every free-text field of their records is sealed (``eventlog.crypto``), a
session's end status and the reason Claude Code gave for ending it included; what stays in
the clear are ids, counts, hashes and fixed codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec import Memory
from airsspec.hooks.events import Job, run_job
from eventlog.crypto import FORGOTTEN, SEALED
from tests.conftest import init_encrypted


def _holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` holding ``needle``, in any case."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and needle.lower() in p.read_bytes().lower()
    )


@pytest.mark.parametrize("mode", ["user", "session"])
def test_an_end_status_and_a_hooks_end_reason_are_sealed_and_gone_after_forget(
    tmp_path: Path, offline: None, mode: str
) -> None:
    init_encrypted(tmp_path, mode)
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        for session in ("a1", "a2"):
            ana.sessions.start(session, task="a task")
            ana.append(session, {"type": "user", "content": "hello"})
        ana.sessions.end("a1", status="CANARYSTATUS the acme deal fell through")
        run_job(ana, Job(("a2",), "CANARYREASON logged out after the audit"))  # SessionEnd
        memory.scoped(user="ben").append("b1", {"type": "user", "content": "ben's own"})
        memory.project()
        ended = [r for r in memory.replay("a1") if r.type == "session_ended"]
        assert [r.status for r in ended] == ["CANARYSTATUS the acme deal fell through"]
        assert _holding(tmp_path / ".airsspec" / "contexts", b"canary") == []  # sealed
        assert memory.sessions.info("a2")["status"] == "CANARYREASON logged out after the audit"

        if mode == "user":
            memory.forget(user="ana")
        else:
            for session in ("a1", "a2"):
                ana.forget(session=session)
        assert [r.status for r in memory.replay("a1") if r.type == "session_ended"] == [FORGOTTEN]
    assert _holding(tmp_path, b"canary") == []
    stored = (tmp_path / ".airsspec" / "contexts" / "agent" / "a2.jsonl").read_bytes()
    assert f'"status":"{SEALED}"'.encode() in stored

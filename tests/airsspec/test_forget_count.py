"""What ``forget`` reports is what it forgot: ``records_forgotten`` counts the records that
could be read before it and cannot after, no more (records an earlier forget made unreadable)
and no fewer (records the subject appended while it ran, in a session it already had or in
one it started meanwhile, which it forgets too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import airsspec.forgetting
from airsspec import Memory
from eventlog.crypto import FORGOTTEN
from tests.conftest import init_encrypted


def _said(n: int, what: str) -> list[dict[str, Any]]:
    return [{"type": "user", "content": f"{what} {i}"} for i in range(n)]


@pytest.mark.parametrize("mode", ["user", "session"])
def test_records_an_earlier_forget_made_unreadable_are_not_counted_again(
    tmp_path: Path, offline: None, mode: str
) -> None:
    init_encrypted(tmp_path, mode)
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append_many("a1", _said(3, "first"))
        ana.append_many("a2", _said(4, "second"))
        memory.project(("hot",))
        assert ana.forget(session="a1").records_forgotten == 3
        assert memory.forget(user="ana").records_forgotten == 4
        assert memory.forget(user="ana").records_forgotten == 0  # run again: nothing more


@pytest.mark.parametrize("mode", ["user", "session"])
def test_records_appended_while_forget_runs_are_forgotten_and_counted(
    tmp_path: Path, offline: None, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends land between forget's last reading and the destruction of the keys (as under
    load): 5 records in a session it knew, and a session started meanwhile with 2."""
    init_encrypted(tmp_path, mode)
    drop_documents = airsspec.forgetting._drop_documents
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append_many("a1", _said(4, "before"))
        memory.scoped(user="ben").append_many("b1", _said(2, "ben"))
        memory.project()

        def meanwhile(*args: Any, **kwargs: Any) -> None:
            drop_documents(*args, **kwargs)
            ana.append_many("a1", _said(5, "during"))
            ana.append_many("a3", _said(2, "new session during"))
            memory.project(("hot",))

        monkeypatch.setattr(airsspec.forgetting, "_drop_documents", meanwhile)
        done = memory.forget(user="ana")
        assert done.sessions == ["a1", "a3"]
        assert done.records_forgotten == 4 + 5 + 2
        for session in ("a1", "a3"):
            said = [r.content for r in memory.replay(session) if r.type == "user"]
            assert said and set(said) == {FORGOTTEN}
        hot = (memory.root / "state" / "hot" / "a3.json").read_bytes()
        assert b"during" not in hot
        assert [r.content for r in memory.replay("b1") if r.type == "user"] == ["ben 0", "ben 1"]

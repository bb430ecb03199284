"""What one read (``Kernel.reading``: a context build, a search) computes once, and what it must
never carry: another scope's answer, or a fold behind the log taken for the log's head once
the read is over. The next read sees everything appended before it started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airsspec import Memory
from airsspec.memory.context import KernelSource
from eventlog.errors import NoSuchSessionError

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with Memory.open(tmp_path, create=True) as opened:
        opened.scoped(user="alice").append("a1", _say("alice plans the payment gateway"))
        opened.append("team", _say("team note: the merger closes in march"))
        opened.project()
        yield opened


def _say(text: str) -> dict[str, str]:
    return {"type": "user", "content": text}


def test_an_assignment_landing_during_a_read_is_seen_by_the_next_read(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process gives the team's session to bob while alice's context is being built,
    after the build brought the learnings current (its fold reaches this workspace later).
    The build's later catch-ups ask the gate about every session, whose learnings it does not
    fold again within the read: the owner it then reads is the one before the assignment, and
    must not be cached as the owner at the log's new head, or alice goes on reading bob's
    session once everything is folded, until someone writes there."""
    alice = memory.scoped(user="alice")
    facts = KernelSource.facts

    def assigned_meanwhile(source: KernelSource, session: str, reader: Any) -> Any:
        held = facts(source, session, reader)  # the learnings are current for this read now
        memory.kernel.log.append_many(
            "team", [{"type": "session_assigned", "user": "bob"}], system=True
        )
        return held

    monkeypatch.setattr(KernelSource, "facts", assigned_meanwhile)
    alice.context("a1", budget=2000, query="gateway")
    monkeypatch.undo()
    memory.project()  # the assignment folded everywhere
    assert not alice.has_session("team")
    with pytest.raises(NoSuchSessionError):
        alice.hot("team")
    with pytest.raises(NoSuchSessionError):
        list(alice.replay("team"))
    assert all(hit["session"] != "team" for hit in alice.search("merger march", k=10)["hits"])


def test_a_session_given_to_another_user_during_a_context_build_reaches_none_of_it(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While alice's context is built, an admin gives the team's session to bob, who writes
    there, and it is compacted; the cold table (behind on the team's session when the build
    began) and the summaries take bob's words before the build's search and its summaries of
    other sessions are read. The sessions alice may read are read after them, not kept from
    the start of the build: nothing bob wrote reaches her context."""
    alice = memory.scoped(user="alice")
    memory.append("team", _say("team note two: the gateway ships on friday"))  # cold lags
    facts = KernelSource.facts

    def assigned_meanwhile(source: KernelSource, session: str, reader: Any) -> Any:
        held = facts(source, session, reader)
        memory.sessions.assign("team", user="bob")
        secrets = [_say(f"bob {i}: the gateway password is hunter2") for i in range(4)]
        memory.scoped(user="bob").append_many("team", secrets)
        memory.compact("team", force=True)
        return held

    monkeypatch.setattr(KernelSource, "facts", assigned_meanwhile)
    built = alice.context("a1", budget=4000, query="gateway password")
    assert "hunter2" not in str(built)


def test_what_a_read_keeps_is_its_scopes_and_ends_with_it_even_when_it_fails(
    memory: Memory,
) -> None:
    """Within one read of an admin's kernel, the learnings kept for alice's scope are never
    given for bob's; a read that fails part way keeps nothing for the next one, which sees a
    record appended after the failure."""
    from airsspec.memory.learnings import Learnings
    from projections.scopes import Scope

    memory.scoped(user="bob").append("b1", _say("bob keeps notes"))
    memory.scoped(user="alice").learnings.add("alice prefers tabs", session="a1")
    memory.scoped(user="bob").learnings.add("bob prefers spaces", session="b1")
    kernel = memory.kernel
    with kernel.reading():
        alices = {a.text for a in Learnings(kernel).seen(Scope(user="alice"))}
        bobs = {a.text for a in Learnings(kernel).seen(Scope(user="bob"))}
    assert "alice prefers tabs" in alices and "bob prefers spaces" not in alices
    assert "bob prefers spaces" in bobs and "alice prefers tabs" not in bobs
    with pytest.raises(RuntimeError), kernel.reading():
        kernel.fresh("search")
        Learnings(kernel).seen(Scope(user="alice"))
        raise RuntimeError("a read failing part way")
    memory.scoped(user="alice").learnings.add("alice names branches by ticket", session="a1")
    memory.scoped(user="alice").append("a1", _say("the zeppelin rollout starts monday"))
    found = memory.scoped(user="alice").search("zeppelin rollout", k=3)["hits"]
    assert found and found[0]["session"] == "a1"
    with kernel.reading():
        texts = {a.text for a in Learnings(kernel).seen(Scope(user="alice"))}
    assert "alice names branches by ticket" in texts


def test_a_document_added_before_a_context_build_is_recalled_by_it(memory: Memory) -> None:
    """A context build brings the learnings current first (its look at the log is then kept
    for the read), and the cold tier later registers the documents added under ``sources/``
    (a ``source_indexed`` record appended to the workspace's own log in that same read): the
    document is indexed and recalled by this build, not the next one."""
    sources = memory.root / "sources"
    sources.mkdir(exist_ok=True)
    (sources / "runbook.md").write_text("# Runbook\nThe zebra failover drill runs on Tuesdays.\n")
    built = memory.context("a1", 2000, query="When does the zebra failover drill run?")
    assert "zebra failover drill runs on Tuesdays" in built

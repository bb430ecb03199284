"""The access gate (``memory.scopes``): the workspace's own log as each reader's filtered view,
read-only principals that append nothing, global learnings for admins only, the team's sessions,
and assignments that move a session to a user, seen by every open memory at its next call."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import pytest

from airsspec import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from airsspec.serve.tokens import TokenStore
from eventlog.errors import NoSuchSessionError, ReadOnlyTokenError, ScopeError
from eventlog.schema import MEMORY_SESSION
from tests.conftest import snapshot


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with Memory.open(tmp_path, create=True) as opened:
        yield opened


def _say(text: str) -> dict[str, str]:
    return {"type": "user", "content": text}


def _log_bytes(memory: Memory) -> int:
    return sum(p.stat().st_size for p in memory.log_dir.glob("*.jsonl"))


def _tenants(memory: Memory) -> tuple[Memory, Memory]:
    """alice and bob, each with a session, a learning, a context query and a verdict."""
    alice, bob = memory.scoped(user="alice"), memory.scoped(user="bob")
    alice.append("a1", _say("alice works on the payment gateway"))
    bob.append("b1", _say("bob works on the secret merger"))
    mine = bob.learnings.add("bob-learning: the merger is with Initech", scope="project")
    bob.context("b1", budget=500, query="bob-query about the merger")
    bob.learnings.reject(mine.learning_id, reason="bob-reason: wrong company")
    alice.learnings.add("alice-learning: use tabs", scope="project")
    alice.context("a1", budget=500, query="alice-query about payments")
    return alice, bob


def test_the_workspace_log_reaches_a_user_only_as_its_own_view(memory: Memory) -> None:
    alice, _ = _tenants(memory)
    everything = b"\n".join(raw for _, raw in memory.replay(MEMORY_SESSION, raw=True))
    assert b"bob-learning" in everything and b"bob-query" in everything  # an admin: all
    seen = b"\n".join(raw for _, raw in alice.replay(MEMORY_SESSION, raw=True))
    assert b"alice-learning" in seen and b"alice-query" in seen
    for theirs in (b"bob-learning", b"bob-query", b"bob-reason"):
        assert theirs not in seen
    with pytest.raises(NoSuchSessionError):
        alice.hot("b1", fresh=False)  # as last saved: the gate all the same
    kinds = {r.type for r in alice.replay(MEMORY_SESSION)}
    assert kinds == {"learning", "memory_accessed"}


def test_a_plain_replay_passes_the_same_gate(memory: Memory) -> None:
    """The CLI's and the server's printing path (``replay(plain=True)``, stored dicts) is
    refused another user's session and gets the workspace log as the user's own view."""
    alice, _ = _tenants(memory)
    with pytest.raises(NoSuchSessionError):
        list(alice.replay("b1", plain=True))
    own = [raw for _, raw in alice.replay(MEMORY_SESSION, raw=True)]
    assert own and [raw for _, raw in alice.replay(MEMORY_SESSION, raw=True, plain=True)] == own
    said = [r for r in alice.replay("a1", plain=True) if r.type == "user"]
    assert [r.id for r in said] == [r.id for r in alice.replay("a1") if r.type == "user"]
    assert [r["content"] for r in said] == ["alice works on the payment gateway"]


def test_learnings_read_for_a_session_refuse_one_the_caller_may_not_read(
    memory: Memory,
) -> None:
    """Ranking the learnings for a session names that session: the service refuses another
    user's session as every read does (no door has to check it first); a session that
    has no log yet is one about to start, ranked for as its principal's."""
    alice, _ = _tenants(memory)
    assert alice.learnings.list(reader="a1").learnings  # her own: ranked for her session
    with pytest.raises(NoSuchSessionError):
        alice.learnings.list(reader="b1")
    fresh = alice.learnings.list(reader="a2").learnings
    assert fresh and [a.id for a in fresh] == [a.id for a in alice.learnings.list().learnings]


def test_no_caller_writes_to_the_workspace_log_directly(memory: Memory) -> None:
    _tenants(memory)
    before = snapshot(memory.log_dir)
    for who in (memory, memory.scoped(user="alice")):
        for write in (
            lambda m=who: m.append(MEMORY_SESSION, _say("x")),
            lambda m=who: m.sessions.end(MEMORY_SESSION, status="x"),
            lambda m=who: m.sessions.phase(MEMORY_SESSION, "design"),
        ):
            with pytest.raises(ScopeError, match="own log"):
                write()
    assert snapshot(memory.log_dir) == before


def test_a_read_only_principal_appends_nothing_and_reads_like_its_user(memory: Memory) -> None:
    _tenants(memory)
    memory.append("u1", _say("a team note about payments"))
    reader = memory.scoped(user="alice", read_only=True)
    before = snapshot(memory.log_dir)
    text = reader.context("a1", budget=800, query="payments")
    assert "payment gateway" in text
    assert reader.search("payments", k=5)["hits"]
    reader.learnings.list(reader="a1")
    assert [s.session for s in reader.sessions.list()] == ["a1", "u1"]
    for write in (
        lambda: reader.append("a1", _say("x")),
        lambda: reader.append("new", _say("x")),
        lambda: reader.learnings.add("x"),
        lambda: reader.sessions.start("a2"),
        lambda: reader.sessions.end("a1"),
    ):
        with pytest.raises(ReadOnlyTokenError):
            write()
    assert snapshot(memory.log_dir) == before
    assert memory.scoped(user="alice").scoped(read_only=True).read_only  # a view keeps it


def test_the_teams_sessions_are_read_by_every_user_and_written_by_admins(
    memory: Memory,
) -> None:
    memory.append("team", _say("the deploy checklist lives in docs/deploy.md"))
    memory.learnings.add("Run the linter before each commit.", scope="project")
    for user in ("alice", "bob"):
        view = memory.scoped(user=user)
        assert [r.type for r in view.replay("team")] == ["user"]
        assert [a.text for a in view.learnings.list().learnings] == [
            "Run the linter before each commit."
        ]
        with pytest.raises(ScopeError, match="team's"):
            view.append("team", _say("x"))
    assert memory.append("team", _say("an admin writes")).seq == 2


def test_an_assignment_makes_a_session_private_for_every_open_memory(
    memory: Memory, tmp_path: Path
) -> None:
    memory.append("s1", _say("the quarterly numbers"))
    with Memory.open(tmp_path) as other_process:  # caches owners of its own
        bob = other_process.scoped(user="bob")
        assert [r.type for r in bob.replay("s1")] == ["user"]  # the team's, for now
        with pytest.raises(ScopeError):
            memory.scoped(user="alice").sessions.assign("s1", user="alice")  # admins only
        record = memory.sessions.assign("s1", user="alice")
        assert (record.type, record.user) == ("session_assigned", "alice")
        with pytest.raises(NoSuchSessionError):
            list(bob.replay("s1"))
        alice = other_process.scoped(user="alice")
        assert alice.append("s1", _say("alice's now")).seq == 3
    assert memory.verify().ok


def test_a_read_only_token_changes_nothing_through_http(memory: Memory) -> None:
    _tenants(memory)
    token = TokenStore(memory.root).create("alice", read_only=True)[1]
    served = Served(memory, local_user="owner", background=False)
    before = _log_bytes(memory)
    headers = {"Authorization": f"Bearer {token}"}
    with serving(served) as where, httpx.Client(base_url=where["url"], headers=headers) as http:
        body = {"budget": 400, "query": "payments " * 500}
        answer = http.post("/v1/sessions/a1/context", json=body)
        assert answer.status_code == 200, answer.text
        replayed = http.post(f"/v1/sessions/{MEMORY_SESSION}/replay", json={}).json()
        assert replayed and all("bob" not in str(r) for r in replayed)
        refused = http.post("/v1/learnings", json={"text": "x", "scope": "project"})
        assert refused.status_code == 403
    assert _log_bytes(memory) == before


def test_the_gates_sessions_by_owner_equal_the_read_rule_asked_per_session(
    memory: Memory,
) -> None:
    """The gate makes each owner's scope once and asks the read rule once per owner: what each
    reader may see is still what the rule says of every session, asked one by one, after
    appends and an assignment in between."""
    from projections.scopes import TEAM, Scope

    owners = [
        {"user": "alice"},
        {"user": "alice", "agent": "coder"},
        {"user": "bob", "project": "web"},
        {"agent": "coder"},
        {},
    ]
    for number in range(15):
        scoped = memory.scoped(**owners[number % len(owners)])
        scoped.append(f"s{number:02d}", _say(f"turn {number}"))
    readers = [
        Scope(user="alice"),
        Scope(user="alice", agent="coder"),
        Scope(user="bob"),
        Scope(user="bob", project="web"),
        Scope(user=TEAM),
        Scope(agent="coder"),
    ]
    gate = memory.kernel.gate

    def one_by_one(reader: Scope) -> set[str]:
        found = memory.kernel.projector("learnings").owners()
        return {s for s, o in found.items() if s != MEMORY_SESSION and reader.reads(Scope.of(o))}

    for step in range(2):
        for reader in readers:
            assert gate.visible(reader) == one_by_one(reader), (step, reader)
            view = memory.scoped(**reader.to_fields()).kernel.gate
            assert set(view.owners()) == one_by_one(reader), (step, reader)
        assert gate.visible(Scope()) is None  # unscoped: every session
        memory.scoped(user="bob").append("s99", _say("a later session"))
        memory.sessions.assign("s04", user="bob")  # the team's session becomes bob's


def test_a_scoped_memory_that_read_before_sees_what_a_new_one_sees_after_each_change(
    memory: Memory,
) -> None:
    """A view kept between reads (the server keeps one per scope) answers, after every change
    of owners (a new session of its own, another user's, the team's, an assignment), as a
    view made after the change."""
    kept = memory.scoped(user="alice")
    memory.append("team", _say("the team's"))

    def listed(view: Memory) -> list[str]:
        return sorted(info.session for info in view.sessions.list())

    changes = [
        lambda: kept.append("a1", _say("alice's")),
        lambda: memory.scoped(user="bob").append("b1", _say("bob's")),
        lambda: memory.append("team2", _say("the team's too")),
        lambda: memory.sessions.assign("team2", user="bob"),
        lambda: memory.sessions.assign("b1", user="alice"),
    ]
    seen = [listed(kept)]
    for change in changes:
        change()
        assert listed(kept) == listed(kept) == listed(memory.scoped(user="alice"))
        seen.append(listed(kept))
    assert seen == [
        ["team"],
        ["a1", "team"],
        ["a1", "team"],
        ["a1", "team", "team2"],
        ["a1", "team"],
        ["a1", "b1", "team"],
    ]

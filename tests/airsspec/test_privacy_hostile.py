"""Hostile readers and forgetting: a reader scoped to one user reaches nothing of another
user's sessions through any door, and a key file the store does not own is never trusted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airsspec import Memory
from eventlog.crypto import FORGOTTEN, FileKeyStore, Sealer, key_id
from eventlog.errors import KeyStoreError, NoSuchSessionError, ScopeError
from eventlog.schema import MEMORY_SESSION
from projections.scopes import Scope
from tests.conftest import init_workspace
from tests.support.cli import run_cli, run_process

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _two_users(root: Path) -> None:
    init_workspace(root)
    with Memory.open(root) as memory:
        ana, ben = memory.scoped(user="ana"), memory.scoped(user="ben")
        ana.append_many(
            "a1", [{"type": "user", "content": f"ANACANARY {i} tabs"} for i in range(40)]
        )
        ana.compact("a1", force=True)
        ben.append_many("b1", [{"type": "user", "content": f"ben zebra {i}"} for i in range(40)])
        ben.compact("b1", force=True)


def test_a_scoped_reader_neither_lists_nor_reads_another_users_library_file(
    tmp_path: Path, env: None
) -> None:
    _two_users(tmp_path)
    as_ben = {**ENV, "AIRSSPEC_USER": "ben"}
    listed = run_cli("library", "--json", cwd=tmp_path, env=as_ben)
    assert listed.returncode == 0 and b'"a1"' not in listed.stdout and b'"b1"' in listed.stdout
    with Memory.open(tmp_path) as memory:
        files = {e["session"]: e["library_no"] for e in memory.library()}
    shown = run_cli("library", "--show", str(files["a1"]), cwd=tmp_path, env=as_ben)
    assert shown.returncode != 0 and b"ANACANARY" not in shown.stdout + shown.stderr
    assert shown.stderr.decode().startswith("airsspec: error:")
    own = run_cli("library", "--show", str(files["b1"]), cwd=tmp_path, env=as_ben)
    assert own.returncode == 0 and b"zebra" in own.stdout


def test_a_key_file_replaced_by_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    store = FileKeyStore(tmp_path / "keys")
    kid = key_id("user:ana")
    store.key(kid, create=True)
    elsewhere = tmp_path / "elsewhere.key"
    elsewhere.write_bytes(b"k" * 32)
    path = tmp_path / "keys" / f"{kid}.key"
    path.unlink()
    os.symlink(elsewhere, path)
    with pytest.raises(KeyStoreError, match="a symlink stands"):
        FileKeyStore(tmp_path / "keys").key(kid, create=False)
    with pytest.raises(KeyStoreError, match="a symlink stands"):
        FileKeyStore(tmp_path / "keys").destroy(kid)
    assert elsewhere.read_bytes() == b"k" * 32  # the target was neither used nor touched


def test_a_key_another_process_is_making_is_never_read_before_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers make one new key at once (two admins starting one session): the one that
    looks while the other writes it gets that same key (it read the empty file: an error)."""
    kid = key_id("session:s1")
    first, second = FileKeyStore(tmp_path / "keys"), FileKeyStore(tmp_path / "keys")
    write, looked, seen = os.write, [], []

    def meanwhile(fd: int, data: Any) -> int:
        if not looked:  # the first store is writing its key: the second looks now
            looked.append(True)
            seen.append(second.key(kid, create=True))
        return write(fd, data)

    with monkeypatch.context() as slow:
        slow.setattr(os, "write", meanwhile)
        made = first.key(kid, create=True)
    assert looked == [True]
    assert made is not None and len(made) == 32
    assert seen == [made] == [FileKeyStore(tmp_path / "keys").key(kid, create=False)]


def _workspace(root: Path, mode: str) -> None:
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as f:
        f.write(f'\n[privacy]\nencrypt = "{mode}"\n')


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _reasons(memory: Memory) -> set[str]:
    return {r.reason for r in memory.replay(MEMORY_SESSION) if r.type == "learning_feedback"}


@pytest.mark.parametrize("mode", ["user", "session"])
def test_a_reason_given_when_rejecting_a_learning_is_forgotten_with_it(
    tmp_path: Path, env: None, mode: str
) -> None:
    _workspace(tmp_path, mode)
    with Memory.open(tmp_path) as memory:
        ana, ben = memory.scoped(user="ana"), memory.scoped(user="ben")
        ana.append("a1", {"type": "user", "content": "hello"})
        in_session = ana.learnings.add("prefers tabs", session="a1")
        ana.learnings.feedback(in_session.learning_id, "rejected", reason="CANARY1 my diagnosis")
        ben.append("b1", {"type": "user", "content": "hi"})
        kept = ben.learnings.add("ben likes zebras", session="b1")
        ben.learnings.feedback(kept.learning_id, "confirmed", reason="ben's own reason")
        memory.project()
        assert _files_holding(tmp_path / ".airsspec" / "contexts", b"CANARY1") == []
        assert _reasons(memory) == {"CANARY1 my diagnosis", "ben's own reason"}
        assert ana.learnings.get(in_session.learning_id).status == "rejected"
        if mode == "user":
            ana.forget(user="ana")
        else:
            ana.forget(session="a1")
        assert _files_holding(tmp_path, b"CANARY1") == []
        assert _reasons(memory) == {FORGOTTEN, "ben's own reason"}
        assert ben.learnings.get(kept.learning_id).confirmed
        assert memory.verify().ok


_KILLED_AFTER_THE_KEYS = """
import os, signal, sys
from airsspec import Memory
from eventlog.crypto import Sealer, key_id

real = Sealer.forget_key
def forget_key(self, kid):
    done = real(self, kid)
    if kid == key_id("user:ana"):  # ana's content is unreadable now: die before recording it
        os.kill(os.getpid(), signal.SIGKILL)
    return done
Sealer.forget_key = forget_key
with Memory.open(sys.argv[1]) as memory:
    memory.forget(user="ana")
"""


def _killed(script: str, root: Path) -> None:
    """Run ``script`` on ``root`` in a process of its own, which kills itself (SIGKILL) part
    way; checked killed, and gone."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(root)],
        env={**os.environ, **ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, err.decode()[-2000:]
    assert child.poll() is not None  # nothing this test started is left running


def _anas_compacted_session(memory: Memory) -> None:
    """Ana's session ``a1``: 40 messages with a marker each, compacted (a summary quotes them)."""
    ana = memory.scoped(user="ana")
    ana.append_many("a1", [{"type": "user", "content": f"CANARY{i} tabs"} for i in range(40)])
    ana.compact("a1", force=True)


@pytest.mark.slow
def test_a_forget_killed_once_the_keys_are_gone_leaves_no_plaintext_a_project_keeps(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        _anas_compacted_session(memory)
        memory.project()
    assert _files_holding(tmp_path / ".airsspec" / "state", b"CANARY")
    _killed(_KILLED_AFTER_THE_KEYS, tmp_path)
    assert run_cli("project", cwd=tmp_path, env=ENV).returncode == 0
    assert _files_holding(tmp_path, b"CANARY") == []
    assert run_cli("verify", cwd=tmp_path, env=ENV).returncode == 0


def test_a_scoped_memory_cannot_widen_its_reads_through_a_scope_argument(
    tmp_path: Path, env: None
) -> None:
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ANACANARY tabs"})
        ben = memory.scoped(user="ben")
        ben.append("b1", {"type": "user", "content": "ben zebra tabs"})
        for wider in (Scope(), Scope(user="ana"), Scope(agent="x")):
            with pytest.raises(ScopeError):
                ben.search("ANACANARY tabs", k=20, scope=wider)
            with pytest.raises(ScopeError):
                ben.learnings.list(scope=wider)
        narrower = ben.search("tabs", k=20, scope=Scope(user="ben", project="p"))
        assert narrower["hits"] == []  # b1 names no project: a narrower reader sees less
        assert {h["session"] for h in ben.search("tabs", k=20)["hits"]} == {"b1"}


def test_of_two_users_starting_one_session_at_once_only_the_first_writes_to_it(
    tmp_path: Path, env: None
) -> None:
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as first, Memory.open(tmp_path) as second:
        ana, ben = first.scoped(user="ana"), second.scoped(user="ben")
        opening = type(ana.scopes).opening

        def ben_gets_in_between(self: Any, session: str) -> list:
            found = opening(self, session)  # ana found no session "race" ...
            ben.append(session, {"type": "user", "content": "ben was here"})  # ... ben made it
            return found

        ana.scopes.opening = ben_gets_in_between.__get__(ana.scopes)  # type: ignore[method-assign]
        with pytest.raises(NoSuchSessionError):  # ben's: as if there were none
            ana.append("race", {"type": "user", "content": "ana was here"})
        said = [r.content for r in first.replay("race") if r.type == "user"]
        assert said == ["ben was here"]


def test_a_forget_in_another_process_is_honoured_by_an_open_memory(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as server:
        ana = server.scoped(user="ana")
        ana.append("a1", {"type": "user", "content": "CANARY in an open memory"})
        assert [r.content for r in server.replay("a1") if r.type == "user"] == [
            "CANARY in an open memory"
        ]
        # a process of its own: this one's ciphers are asked again after KEY_RECHECK_SECONDS,
        # which a forget in this process could finish within
        done = run_process("forget", "--user", "ana", cwd=tmp_path, env=ENV)
        assert done.returncode == 0, done.stderr
        assert [r.content for r in server.replay("a1") if r.type == "user"] == [FORGOTTEN]
        ana.append("a1", {"type": "user", "content": "said after being forgotten"})
    with Memory.open(tmp_path) as later:  # what was appended after is readable, not lost
        said = [r.content for r in later.replay("a1") if r.type == "user"]
        assert said == [FORGOTTEN, "said after being forgotten"]


def _anas_session_given_to_ben(tmp_path: Path) -> None:
    """Ana's compacted session ``a1``, then given by an admin to ben: sealed under her key,
    its copies holding her words."""
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        _anas_compacted_session(memory)
        memory.sessions.assign("a1", user="ben")
        memory.project()
    assert _files_holding(tmp_path / ".airsspec", b"CANARY")


def test_forgetting_a_user_purges_a_session_of_theirs_an_admin_gave_to_another_user(
    tmp_path: Path, env: None
) -> None:
    _anas_session_given_to_ben(tmp_path)
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    with Memory.open(tmp_path) as memory:
        said = {r.content for r in memory.replay("a1") if r.type == "user"}
        assert said == {FORGOTTEN}  # her key is gone: the log cannot be read
        assert not [h for h in memory.search("CANARY1 tabs", k=20)["hits"] if "CANARY" in h["text"]]
    assert _files_holding(tmp_path, b"CANARY") == []  # nor any copy derived from it


def _sealed_for(root: Path, session: str) -> list[str]:
    """Whose user key seals each user message stored in ``session``, in order (read from the
    key id of each stored line: the user key it is nested in)."""
    import orjson

    from eventlog.crypto import kid_parts
    from eventlog.layout import session_path

    with Memory.open(root) as memory:
        path = session_path(memory.workspace.log_dir, session)
    users = {key_id(f"user:{u}"): u for u in ("ana", "ben")}
    stored = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return [
        next((users[k] for k in kid_parts(body["sealed"]["kid"]) if k in users), "?")
        for body in stored
        if body["type"] == "user"
    ]


def test_what_the_new_owner_writes_in_a_session_given_to_them_outlives_forgetting_the_first(
    tmp_path: Path, env: None
) -> None:
    _anas_session_given_to_ben(tmp_path)
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ben").append_many(
            "a1", [{"type": "user", "content": f"BENWORDS{i} tabs"} for i in range(3)]
        )
        memory.project()
    assert _sealed_for(tmp_path, "a1") == ["ana"] * 40 + ["ben"] * 3
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records_in_clear"] == 0  # ben's are sealed, for him
    assert b"warning" not in done.stderr
    with Memory.open(tmp_path) as memory:
        said = [r.content for r in memory.replay("a1") if r.type == "user"]
        assert said == [FORGOTTEN] * 40 + [f"BENWORDS{i} tabs" for i in range(3)]
        hits = memory.scoped(user="ben").search("BENWORDS1 tabs", k=5)["hits"]
        assert any("BENWORDS1" in h["text"] for h in hits)  # folded again: his words recalled
    assert _files_holding(tmp_path, b"CANARY") == []
    assert _files_holding(tmp_path / ".airsspec" / "state", b"BENWORDS")


def test_forgetting_a_user_right_after_giving_away_their_session_in_one_memory_purges_it(
    tmp_path: Path, env: None
) -> None:
    """A memory that assigns a session it has not written to (a server, a script), then forgets
    its first owner: she is among the session's owners all the same, so it is purged."""
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        _anas_compacted_session(memory)
        memory.project()
    with Memory.open(tmp_path) as admin:  # a memory that never read a1's owner before
        admin.sessions.assign("a1", user="ben")
        assert "a1" in admin.forget(user="ana").sessions
    assert _files_holding(tmp_path, b"CANARY") == []


def test_forgetting_the_user_a_session_was_given_to_keeps_what_its_first_owner_wrote(
    tmp_path: Path, env: None
) -> None:
    """Ben's session, given by an admin to ana, who writes there: forgetting ana forgets her
    words and keeps his (the session's own key stays: it holds his too)."""
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ben").append_many(
            "b1", [{"type": "user", "content": f"BENWORDS{i} tabs"} for i in range(3)]
        )
        memory.sessions.assign("b1", user="ana")
        memory.scoped(user="ana").append("b1", {"type": "user", "content": "ANAWORDS tabs"})
        memory.project()
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    assert run_cli("verify", cwd=tmp_path, env=ENV).returncode == 0
    with Memory.open(tmp_path) as memory:
        said = [r.content for r in memory.replay("b1") if r.type == "user"]
        assert said == [f"BENWORDS{i} tabs" for i in range(3)] + [FORGOTTEN]
    assert _files_holding(tmp_path, b"ANAWORDS") == []
    assert _files_holding(tmp_path / ".airsspec" / "state", b"BENWORDS")  # folded again


def test_an_assignment_whose_write_failed_seals_nothing_for_its_user(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An assignment the log could not write (a full disk) gave the session to no one: what
    its owner appends next is sealed for her, not for the user it named."""
    from eventlog.errors import LogWriteError
    from eventlog.log import EventLog

    def full(*_: object) -> None:
        raise LogWriteError(28, "No space left on device")

    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append("a1", {"type": "user", "content": "before"})
        with monkeypatch.context() as disk:
            disk.setattr(EventLog, "_write", full)
            with pytest.raises(LogWriteError):
                memory.sessions.assign("a1", user="ben")
        ana.append("a1", {"type": "user", "content": "after"})
    assert _sealed_for(tmp_path, "a1") == ["ana", "ana"]


_TORN_ASSIGNMENT = """
import os, signal, sys
from airsspec import Memory
from eventlog.log import EventLog

def torn(self, session, handle, size, data):
    os.write(handle.fd, data[: data.index(b"\\n") + 1])  # the assignment's line, not the batch
    os.kill(os.getpid(), signal.SIGKILL)

EventLog._write = torn
with Memory.open(sys.argv[1]) as memory:
    given = [{"type": "session_assigned", "user": "ben"}, {"type": "user", "content": "lost"}]
    memory.workspace.log.append_many("a1", given, system=True)
"""


@pytest.mark.slow
def test_an_assignment_torn_by_a_crash_seals_nothing_for_its_user(
    tmp_path: Path, env: None
) -> None:
    """A writer killed mid-batch leaves the line of an assignment it never finished; the next
    writer quarantines it under the session's lock, so what it appends is the owner's: sealed
    for her (it was sealed for the user the torn line named, and lost when he was forgotten)."""
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "before"})
    _killed(_TORN_ASSIGNMENT, tmp_path)
    with Memory.open(tmp_path) as memory:
        memory.append("a1", {"type": "user", "content": "after"})
    assert _sealed_for(tmp_path, "a1") == ["ana", "ana"]
    with Memory.open(tmp_path) as memory:
        memory.forget(user="ben")
        said = [r.content for r in memory.replay("a1") if r.type == "user"]
    assert said == ["before", "after"]


def test_forgetting_the_user_a_team_session_was_given_to_keeps_what_the_team_wrote(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:  # the team's session (no user), then ana's
        memory.append_many("t1", [{"type": "user", "content": f"TEAMWORDS{i}"} for i in range(2)])
        memory.sessions.assign("t1", user="ana")
        memory.scoped(user="ana").append("t1", {"type": "user", "content": "ANAWORDS tabs"})
        memory.project()
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    with Memory.open(tmp_path) as memory:
        said = [r.content for r in memory.replay("t1") if r.type == "user"]
    assert said == ["TEAMWORDS0", "TEAMWORDS1", FORGOTTEN]
    assert _files_holding(tmp_path, b"ANAWORDS") == []


def test_what_a_user_wrote_in_the_clear_in_a_session_she_gave_away_is_counted_as_left(
    tmp_path: Path, env: None
) -> None:
    """Written before encryption was on, her words there stay readable: the receipt says so
    (ben's, sealed for him, are not hers to count)."""
    _workspace(tmp_path, "off")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ANACLEAR tabs"})
    config = tmp_path / "airsspec.toml"
    config.write_text(config.read_text().replace('encrypt = "off"', 'encrypt = "user"'))
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ANASEALED tabs"})
        memory.sessions.assign("a1", user="ben")
        memory.scoped(user="ben").append("a1", {"type": "user", "content": "BENWORDS tabs"})
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records_in_clear"] == 1
    with Memory.open(tmp_path) as memory:
        said = [r.content for r in memory.replay("a1") if r.type == "user"]
    assert said == ["ANACLEAR tabs", FORGOTTEN, "BENWORDS tabs"]


class _Killed(Exception):
    """Stands for the process dying where it is raised."""


def test_a_forget_of_a_user_holding_only_a_session_given_to_her_completes_when_run_again(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Her only session is the team's, given to her (its key is kept): once her key is gone,
    a second run finds no key of hers and no session whose key goes, yet must complete the
    first (record the event, fold again)."""
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        memory.append("t1", {"type": "user", "content": "TEAMWORDS"})
        memory.sessions.assign("t1", user="ana")
        memory.scoped(user="ana").append("t1", {"type": "user", "content": "ANAWORDS tabs"})
        memory.project()
        real = Sealer.forget_key

        def forget_key(self: Sealer, kid: str) -> bool:
            done = real(self, kid)
            if kid == key_id("user:ana"):
                raise _Killed  # her key is gone, nothing recorded yet
            return done

        monkeypatch.setattr(Sealer, "forget_key", forget_key)
        with pytest.raises(_Killed):
            memory.forget(user="ana")
        monkeypatch.undo()
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions"] == ["t1"]
    assert run_cli("verify", cwd=tmp_path, env=ENV).returncode == 0
    with Memory.open(tmp_path) as memory:
        said = [r.content for r in memory.replay("t1") if r.type == "user"]
        events = [r for r in memory.replay(MEMORY_SESSION) if r.type == "forgotten"]
    assert said == ["TEAMWORDS", FORGOTTEN]
    assert [(e.name, e.sessions) for e in events] == [("ana", ["t1"])]


def test_a_session_whose_own_records_are_under_its_key_alone_loses_it_with_its_user(
    tmp_path: Path, env: None
) -> None:
    """Written with ``encrypt = "session"`` (under the session's key alone), then the team's
    words, then hers again under ``"user"``: keeping the key would keep her first words, so
    forgetting her destroys it, the others' words with it."""
    _workspace(tmp_path, "session")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ANAFIRST tabs"})
        memory.sessions.assign("a1", user="ben")
        memory.scoped(user="ben").append("a1", {"type": "user", "content": "BENWORDS tabs"})
        memory.sessions.assign("a1", user="ana")
    config = tmp_path / "airsspec.toml"
    config.write_text(config.read_text().replace('encrypt = "session"', 'encrypt = "user"'))
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    with Memory.open(tmp_path) as memory:
        said = [r.content for r in memory.replay("a1") if r.type == "user"]
    assert said == [FORGOTTEN, FORGOTTEN]
    assert _files_holding(tmp_path, b"ANAFIRST") == []


def test_a_batch_sealed_just_before_an_assignment_lands_after_it_sealed_for_the_new_owner(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer seals its batch for ana; an admin elsewhere gives the session to ben before the
    writer takes the session's lock; the batch lands after the assignment, so it is ben's."""
    import eventlog.log

    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as writer, Memory.open(tmp_path) as admin:
        writer.scoped(user="ana").append("a1", {"type": "user", "content": "ana first"})
        sealed = eventlog.log.bodies_to_append
        given: list[bool] = []

        def then_assigned(log: Any, session: str, *args: Any) -> Any:
            found = sealed(log, session, *args)
            if session == "a1" and not given:  # sealed (for ana), not yet written
                given.append(True)
                admin.sessions.assign("a1", user="ben")
            return found

        monkeypatch.setattr(eventlog.log, "bodies_to_append", then_assigned)
        writer.append("a1", {"type": "user", "content": "landed after the assignment"})
        said = [r.content for r in writer.replay("a1") if r.type == "user"]
    assert given == [True]
    assert said == ["ana first", "landed after the assignment"]
    assert _sealed_for(tmp_path, "a1") == ["ana", "ben"]


def test_her_words_under_the_key_of_a_session_she_gave_away_are_reported_as_kept(
    tmp_path: Path, env: None
) -> None:
    """Written with ``encrypt = "session"`` (the session's key alone), then the session given
    to ben: forgetting ana keeps its key for him, so her words there stay readable, and the
    receipt says so (as it says of records written in the clear)."""
    _workspace(tmp_path, "session")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ANAFIRST tabs"})
    config = tmp_path / "airsspec.toml"
    config.write_text(config.read_text().replace('encrypt = "session"', 'encrypt = "user"'))
    with Memory.open(tmp_path) as memory:
        memory.sessions.assign("a1", user="ben")
        memory.scoped(user="ben").append("a1", {"type": "user", "content": "BENWORDS tabs"})
    done = run_cli("forget", "--user", "ana", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records_kept"] == 1
    told = run_cli("forget", "--user", "ana", cwd=tmp_path, env=ENV)  # run again: the warning
    assert told.returncode == 0 and b"1 record(s) were sealed under the key alone" in told.stderr


def test_a_session_another_admin_started_for_another_user_first_is_sealed_for_her(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two admins start the new session n1 at once, for ben and for ana; ana's start lands
    first, so the session is hers: what the other admin writes there after is sealed for her
    (it was sealed for ben, the owner its own start named: forgetting him would lose it)."""
    import eventlog.log

    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as late, Memory.open(tmp_path) as first:
        sealed = eventlog.log.bodies_to_append
        started: list[bool] = []

        def then_started(log: Any, session: str, *args: Any) -> Any:
            found = sealed(log, session, *args)
            if log is late.workspace.log and not started:  # sealed (for ben), not yet written
                started.append(True)
                first.sessions.start("n1", task="hers", user="ana")
            return found

        with monkeypatch.context() as race:
            race.setattr(eventlog.log, "bodies_to_append", then_started)
            late.sessions.start("n1", task="his", user="ben")
        late.append("n1", {"type": "user", "content": "after both"})
        assert late.kernel.gate.owner("n1").user == "ana"
    assert started == [True]
    assert _sealed_for(tmp_path, "n1") == ["ana"]


def test_a_process_open_before_an_assignment_seals_for_the_new_owner_after_it(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as daemon:  # open, and sealing a1 for ana, before and after
        daemon.scoped(user="ana").append("a1", {"type": "user", "content": "ana first"})
        with Memory.open(tmp_path) as admin:  # another process's assignment
            admin.sessions.assign("a1", user="ben")
        daemon.append("a1", {"type": "user", "content": "after the assignment"})
        daemon.append("a1", {"type": "user", "content": "and again"})
    assert _sealed_for(tmp_path, "a1") == ["ana", "ben", "ben"]


def test_a_daemon_folding_with_a_key_it_read_just_before_forget_keeps_no_plaintext(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import airsspec.forgetting
    import airsspec.kernel.purge as purge_module
    import eventlog.crypto as crypto

    # another process's ciphers are asked again after KEY_RECHECK_SECONDS (here longer than a
    # forget of a small session takes, as on a loaded machine; forget knows it), and its
    # daemon folds at once
    monkeypatch.setattr(crypto, "KEY_RECHECK_SECONDS", 0.5)
    monkeypatch.setattr(airsspec.forgetting, "KEPT_KEY_SECONDS", 0.5)
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append_many(
            "a1", [{"type": "user", "content": f"CANARY{i} tabs"} for i in range(5)]
        )
        memory.project()
    daemon = Memory.open(tmp_path)  # a process that stays open (``watch``)
    folded_after_the_drop: list[bool] = []
    forget_key, drop = crypto.Sealer.forget_key, purge_module.drop

    def destroying(self: Any, kid: str) -> bool:
        if not folded_after_the_drop:
            list(daemon.replay("a1"))  # it read the session just before the keys went
        return forget_key(self, kid)

    def dropping(kernel: Any, sessions: list[str], cold: Any, *, always: bool = True) -> None:
        drop(kernel, sessions, cold, always=always)
        if not always and not folded_after_the_drop:  # forget's last drop, before its refold
            daemon.project()
            folded_after_the_drop.append(True)

    monkeypatch.setattr(crypto.Sealer, "forget_key", destroying)
    monkeypatch.setattr(purge_module, "drop", dropping)
    try:
        with Memory.open(tmp_path) as memory:
            memory.forget(user="ana")
    finally:
        daemon.close()
    assert folded_after_the_drop == [True]
    assert _files_holding(tmp_path, b"CANARY") == []


def test_a_user_forgetting_herself_purges_a_session_of_hers_an_admin_gave_to_another_user(
    tmp_path: Path, env: None
) -> None:
    # her own scope may not read the session any longer (it is ben's), yet its copies hold
    # her words in the clear: forgetting herself purges them as an admin's forget does
    _anas_session_given_to_ben(tmp_path)
    with Memory.open(tmp_path) as memory:
        done = memory.scoped(user="ana").forget(user="ana")
        assert done.sessions == ["a1"]
    with Memory.open(tmp_path) as memory:
        said = {r.content for r in memory.replay("a1") if r.type == "user"}
        assert said == {FORGOTTEN}
    assert _files_holding(tmp_path, b"CANARY") == []  # nor any copy derived from it

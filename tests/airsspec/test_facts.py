"""Facts through the facade and the CLI: recorded when a session ends, the present answered
with the current fact and the past with the fact then, a scoped memory seeing only its own
user's facts, and bad input refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec.memory import Memory
from tests.support.cli import run_cli

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


@pytest.fixture
def two_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """alice decides Postgres in one session and MySQL in the next; bob, in his own session,
    decides SQLite for the same table. Returns the workspace and a time between alice's two."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with Memory.open(tmp_path, create=True) as memory:
        alice, bob = memory.scoped(user="alice"), memory.scoped(user="bob")
        alice.sessions.start("a1")
        alice.append(
            "a1", {"type": "user", "content": "We decided to use Postgres for the accounts table."}
        )
        alice.sessions.end("a1")
        between = list(alice.replay("a1"))[-1].ts
        alice.sessions.start("a2")
        alice.append(
            "a2", {"type": "user", "content": "We decided to use MySQL for the accounts table."}
        )
        alice.sessions.end("a2")
        bob.sessions.start("b1")
        bob.append(
            "b1",
            {
                "type": "user",
                "content": "We decided to use SQLite for the accounts table. My name is Bob.",
            },
        )
        bob.sessions.end("b1")
    return tmp_path, between


def _texts(answer: dict) -> list[str]:
    return [f["text"] for f in answer["facts"]]


def test_the_present_gets_the_current_fact_and_the_past_the_fact_then(
    two_sessions: tuple[Path, str],
) -> None:
    root, between = two_sessions
    with Memory.open(root) as memory:
        alice = memory.scoped(user="alice")
        now = alice.facts("accounts table database")
        assert _texts(now) == ["We decided to use MySQL for the accounts table."]
        then = alice.facts("accounts table", as_of=between)
        assert _texts(then) == ["We decided to use Postgres for the accounts table."]
        (old, new) = alice.facts(history=True, kinds=["decision"])["facts"]
        assert (old["current"], old["until"]) == (False, new["since"])
        a2_message = next(r for r in list(alice.replay("a2")) if r.type == "user")
        assert old["superseded_by"] == {"session": "a2", "seq": a2_message.seq}
        assert new["evidence"] == [{"session": "a2", "seq": a2_message.seq}]
        assert memory.facts(kinds=["user"])["facts"][0]["owner"] == {"user": "bob"}


def test_a_scoped_memory_sees_only_its_own_users_facts(two_sessions: tuple[Path, str]) -> None:
    root, _ = two_sessions
    with Memory.open(root) as memory:
        alice = memory.scoped(user="alice")
        seen = alice.facts(history=True)["facts"]
        assert {f["owner"].get("user") for f in seen} == {"alice"}
        assert not any("SQLite" in f["text"] or "Bob" in f["text"] for f in seen)
        # bob's decision on the same table supersedes none of alice's, nor hers his
        everyone = memory.facts(kinds=["decision"])["facts"]
        assert sorted(f["text"].split()[4] for f in everyone) == ["MySQL", "SQLite"]


def test_the_cli_answers_now_and_as_of(two_sessions: tuple[Path, str]) -> None:
    root, between = two_sessions
    shown = run_cli("facts", "accounts", "--json", cwd=root, env=ENV)
    assert shown.returncode == 0, shown.stderr
    assert "MySQL" in json.loads(shown.stdout)["facts"][0]["text"]
    past = run_cli("facts", "--as-of", between, "--kind", "decision", cwd=root, env=ENV)
    assert past.returncode == 0 and b"Postgres" in past.stdout and b"MySQL" not in past.stdout
    history = run_cli("facts", "--history", "--kind", "decision", cwd=root, env=ENV).stdout
    assert b"(superseded)" in history and b"changed by a2 #" in history


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--as-of", "last tuesday"), "as_of"),
        (("-k", "0"), "-k must be at least 1"),
        (("--kind", "mood"), "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    two_sessions: tuple[Path, str], argv: tuple[str, ...], message: str
) -> None:
    root, _ = two_sessions
    logs = sorted(root.rglob("*.jsonl"))
    assert logs
    before = [p.read_bytes() for p in logs]
    shown = run_cli("facts", *argv, cwd=root, env=ENV)
    assert shown.returncode != 0 and b"Traceback" not in shown.stderr
    (line,) = shown.stderr.decode().strip().splitlines()
    assert line.startswith("airsspec: error:") and message in line
    assert [p.read_bytes() for p in logs] == before


def test_every_door_starts_from_the_same_briefing(two_sessions: tuple[Path, str]) -> None:
    from airsspec.hooks.briefing import briefing

    root, _ = two_sessions
    with Memory.open(root) as memory:
        alice = memory.scoped(user="alice")
        context, parts = alice.context_parts("a3", 800)
        block = alice.memory_block("a3", 800)
        assert isinstance(context, str) and context.startswith(block)
        assert "MySQL" in block and "Postgres" not in block  # the learning a fact superseded
        assert "SQLite" not in context  # bob's
        assert parts["facts"] > 0 and sum(parts.values()) <= 800
        for source in ("startup", "resume"):  # Claude Code's SessionStart, new or resumed
            assert block in briefing(alice, "a3", source, 2000)
    alices = {**ENV, "AIRSSPEC_USER": "alice"}
    shown = run_cli("context", "a3", "--budget", "800", "--json", cwd=root, env=alices)
    answer = json.loads(shown.stdout)
    assert list(answer["parts"]) == ["memory", "facts", "earlier", "recalled", "history"]
    facts = answer["parts"]["facts"]
    assert facts["tokens"] > 0 and facts["share"] == round(facts["tokens"] / 800, 3)

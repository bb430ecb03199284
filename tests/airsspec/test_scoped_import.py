"""Imports through a scoped memory: the importing user owns the sessions an import creates, and
an import into another user's session is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

from airsspec.memory import Memory
from eventlog.errors import NoSuchSessionError
from tests.conftest import claude_transcript, init_workspace, snapshot


def test_an_import_by_a_user_creates_sessions_that_user_owns(tmp_path: Path) -> None:
    Memory.open(tmp_path / "ws", create=True).close()
    source = claude_transcript(tmp_path / "mine.jsonl", "Use tabs, never spaces")
    with Memory.open(tmp_path / "ws", user="alice") as alice:
        (result,) = alice.import_transcripts("claude-code", [source])
        assert result.appended == 1
        assert alice.scopes.owner(result.session).user == "alice"
        assert [r.type for r in alice.replay(result.session)] == ["session_started", "user"]
    with Memory.open(tmp_path / "ws", user="bob") as bob:
        assert result.session not in [info.session for info in bob.sessions.list()]


def test_an_import_into_another_users_session_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    Memory.open(tmp_path / "ws", create=True).close()
    source = claude_transcript(tmp_path / "shared.jsonl", "first line")
    with Memory.open(tmp_path / "ws", user="alice") as alice:
        alice.import_transcripts("claude-code", [source])
    grown = source.read_text() + source.read_text().replace('"u1"', '"u2"')
    source.write_text(grown)
    before = snapshot(tmp_path / "ws")
    with Memory.open(tmp_path / "ws", user="bob") as bob:
        try:
            bob.import_transcripts("claude-code", [source])
        except NoSuchSessionError as exc:  # alice's: answered as missing, her name unsaid
            assert "alice" not in str(exc)
        else:
            raise AssertionError("bob imported into alice's session")
    assert snapshot(tmp_path / "ws" / "contexts") == {
        k.removeprefix("contexts/"): v for k, v in before.items() if k.startswith("contexts/")
    }


def test_a_scoped_reader_cannot_export_every_session_as_parquet(tmp_path: Path) -> None:
    from tests.support.cli import run_cli

    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}
    init_workspace(tmp_path)
    with Memory.open(tmp_path / ".airsspec", user="alice") as alice:
        alice.append("a1", {"type": "user", "content": "alice's private note"})
    refused = run_cli(
        "export", "parquet", str(tmp_path / "pq"), cwd=tmp_path, env={**env, "AIRSSPEC_USER": "bob"}
    )
    assert refused.returncode == 2 and not (tmp_path / "pq").exists()
    assert refused.stderr.startswith(b"airsspec: error: export parquet holds every session")
    done = run_cli("export", "parquet", str(tmp_path / "pq"), "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert b'"records": 2' in done.stdout  # session_started and the note

"""Forgetting by crypto-shredding: with ``[privacy] encrypt`` on, content is stored only sealed;
``forget`` destroys the subject's keys, records it, and purges every derived copy, while the
hash chain, seals and every other subject's memory stay as they were."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airsspec import Memory
from eventlog.crypto import CONTENT_FIELDS, FORGOTTEN, FileKeyStore, Sealer, key_id
from eventlog.errors import (
    ForgetError,
    InvalidEventError,
    NoSuchSessionError,
    NothingToCompactError,
)
from eventlog.schema import input_bodies
from tests.conftest import claude_transcript, init_workspace, snapshot
from tests.support.cli import run_cli

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


def _workspace(root: Path, mode: str) -> Path:
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as f:
        f.write(f'\n[privacy]\nencrypt = "{mode}"\n')
    return root


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _recall(hits: list[dict]) -> set[tuple]:
    return {(h["unit_id"], h["text"], h["session"], tuple(h["hashes"])) for h in hits}


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_encrypted_content_is_never_on_disk_in_the_clear_and_reads_back_exactly(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    events = [
        {"type": "user", "content": "CANARY-1 the vault code", "meta": {"note": "CANARY-2"}},
        {"type": "action", "tool": "Edit", "params": {"file_path": "CANARY-3.py"}},
        {"type": "observation", "result": {"out": "CANARY-4"}, "is_error": False},
    ]
    with Memory.open(tmp_path) as memory:
        written = memory.scoped(user="ana").append_many("a1", events)
        read = list(memory.replay("a1"))[1:]
        assert [r.model_dump(exclude={"hash"}) for r in read] == [
            r.model_dump(exclude={"hash"}) for r in written
        ]
        assert read[0].content == "CANARY-1 the vault code" and read[0].meta == {"note": "CANARY-2"}
        assert memory.verify().ok
    log_dir = tmp_path / ".airsspec" / "contexts"
    assert _files_holding(log_dir, b"CANARY") == []
    keys = list((tmp_path / ".airsspec" / "state" / "keys").iterdir())
    assert {k.stem for k in keys} == {key_id("user:ana"), key_id("session:a1")}  # nested
    assert {k.stat().st_mode & 0o777 for k in keys} == {0o600}
    line = json.loads((log_dir / "agent" / "a1.jsonl").read_bytes().splitlines()[1])
    assert line["content"] == "[sealed]" and "meta" not in line
    assert set(line["sealed"]) == {"kid", "nonce", "ct"}


def test_a_caller_cannot_append_a_sealed_field(tmp_path: Path, env: None) -> None:
    _workspace(tmp_path, "session")
    with Memory.open(tmp_path) as memory, pytest.raises(InvalidEventError, match="sealed"):
        memory.append("s1", {"type": "user", "content": "x", "sealed": {"kid": "k"}})


def test_forgetting_a_user_leaves_no_trace_and_changes_no_one_else(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        ana, ben = memory.scoped(user="ana"), memory.scoped(user="ben")
        ana.append_many(
            "a1", [{"type": "user", "content": f"CANARY{i} always use tabs"} for i in range(50)]
        )
        ana.compact("a1", force=True)
        ana.learnings.extract("a1", force=True)
        ana.learnings.add("CANARYL never deploy on Fridays")
        ben.append_many("b1", [{"type": "user", "content": f"ben zebra {i}"} for i in range(40)])
        ben.compact("b1", force=True)
        memory.project()
        before_search = _recall(ben.search("zebra", k=100)["hits"])
        before_context = ben.context("b1", budget=800, query="zebra")
    state = tmp_path / ".airsspec" / "state"
    ben_files = {
        p: p.read_bytes()
        for p in [state / "hot" / "b1.json", *(tmp_path / ".airsspec" / "knowledge").rglob("*.md")]
        if b"ben" in p.read_bytes() or p.parent.name == "hot"
    }
    sealed = run_cli("seal", "-o", str(tmp_path / "seal.json"), cwd=tmp_path, env=ENV)
    assert sealed.returncode == 0 and _files_holding(tmp_path / ".airsspec", b"CANARY")

    done = run_cli("forget", "--user", "ana", "--by", "dpo", "--json", cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sessions"] == ["a1"] and report["records_forgotten"] > 50
    assert report["records_in_clear"] == 0 and report["cache_entries_removed"] > 0

    assert _files_holding(tmp_path, b"CANARY") == []
    assert _files_holding(tmp_path, b"canary") == []  # not even the full-text index's words
    assert run_cli("verify", cwd=tmp_path, env=ENV).returncode == 0
    against = run_cli("verify", "--against", str(tmp_path / "seal.json"), cwd=tmp_path, env=ENV)
    assert against.returncode == 0, against.stdout
    with Memory.open(tmp_path) as memory:
        ben = memory.scoped(user="ben")
        # the same passages (scores are relative to the whole table, so they may move)
        assert _recall(ben.search("zebra", k=100)["hits"]) == before_search
        assert ben.context("b1", budget=800, query="zebra") == before_context
        assert {p: p.read_bytes() for p in ben_files} == ben_files
        (record,) = [r for r in memory.replay("airsspec.memory") if r.type == "forgotten"]
        assert (record.subject, record.name, record.by, record.sessions) == (
            "user",
            "ana",
            "dpo",
            ["a1"],
        )
        said = [r for r in memory.replay("a1") if r.type == "user"]
        assert {r.content for r in said} == {FORGOTTEN}
        assert memory.learnings.list().learnings == []
        hits = memory.search("always use tabs, never deploy on Fridays", k=50)["hits"]
        assert not [h for h in hits if h["session"] == "a1" or "tabs" in h["text"]]
        assert memory.search("zebra", k=50)["hits"]  # search still answers (ben's passages)


def _cli(root: Path, *args: str, user: str | None = None, stdin: bytes | None = None) -> bytes:
    env = {**ENV, "AIRSSPEC_USER": user} if user else ENV
    done = run_cli(*args, cwd=root, env=env, stdin=stdin)
    assert done.returncode == 0, (args, done.stderr.decode())
    return done.stdout


def _grep(root: Path, needle: str) -> set[str]:
    """Files under ``root`` holding ``needle`` in any case, as ``grep -r`` finds them."""
    found = subprocess.run(
        ["grep", "-r", "-l", "-i", "-a", needle, str(root)], capture_output=True, check=False
    )
    assert found.returncode in (0, 1), found.stderr  # 1: nothing found
    by_grep = {str(Path(p).relative_to(root)) for p in found.stdout.decode().splitlines()}
    by_scan = {str(Path(p).relative_to(root)) for p in _files_holding(root, needle.encode())}
    by_scan |= {
        str(Path(p).relative_to(root)) for p in _files_holding(root, needle.lower().encode())
    }
    assert by_scan <= by_grep  # the byte scan (two cases) agrees with grep
    return by_grep


@pytest.mark.slow
def test_a_users_canary_is_everywhere_before_forget_and_nowhere_under_the_workspace_after(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # a folder not named after this test: the files that name paths (a cache of the table's
    # files, say) would hold the marker through the path alone
    tmp_path = tmp_path_factory.mktemp("forget-all")
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir(), outside.mkdir()
    _workspace(ws, "user")
    said = "".join(
        json.dumps({"type": "user", "content": f"CANARYLOG{i} always use tabs"}) + "\n"
        for i in range(30)
    )
    _cli(ws, "append", "a1", user="ana", stdin=said.encode())  # the log
    transcript = claude_transcript(outside / "t-ana.jsonl", "CANARYIMPORT the staging password")
    _cli(ws, "import", "claude-code", str(transcript), user="ana")  # an import
    document = ws / ".airsspec" / "sources" / "users" / "ana" / "notes.md"
    document.parent.mkdir(parents=True)
    document.write_text("# Notes\n\nCANARYSOURCE the vault sits in eu-west.\n")  # sources
    _cli(ws, "learnings", "add", "CANARYLEARNED never deploy on Fridays", user="ana")
    _cli(ws, "compact", "a1", "--force", user="ana")  # a compaction that summarised it
    _cli(ws, "extract", "a1", "--force", user="ana")
    ben_said = "".join(
        json.dumps({"type": "user", "content": f"ben zebra {i}"}) + "\n" for i in range(40)
    )
    _cli(ws, "append", "b1", user="ben", stdin=ben_said.encode())
    _cli(ws, "compact", "b1", "--force", user="ben")
    _cli(ws, "project")
    _cli(ws, "export", "parquet", str(ws / "exports"))  # Parquet inside the project folder
    _cli(ws, "seal", "-o", str(ws / "seal.json"))
    hits = json.loads(_cli(ws, "query", "CANARYSOURCE vault", "--kind", "source", "--json"))
    assert [h["source"] for h in hits["hits"]] == ["users/ana/notes.md"]
    ben_recall = _recall(
        json.loads(_cli(ws, "query", "zebra", "-k", "100", "--json", user="ben"))["hits"]
    )
    assert ben_recall
    ben_context = _cli(ws, "context", "b1", "--budget", "800", "--query", "zebra", user="ben")

    found = _grep(ws, "canary")
    assert {
        ".airsspec/sources/users/ana/notes.md",
        *(f for f in found if f.startswith(".airsspec/knowledge/vectors/")),
        *(f for f in found if f.startswith(".airsspec/knowledge/library/")),
        *(f for f in found if f.startswith(".airsspec/state/hot/")),
    } <= found
    assert any("vectors" in f for f in found) and any("library" in f for f in found)
    assert not any(f.startswith(".airsspec/contexts/") for f in found)  # sealed in the log

    report = json.loads(_cli(ws, "forget", "--user", "ana", "--by", "dpo", "--json"))
    assert report["documents"] == ["users/ana/notes.md"]
    assert len(report["sessions"]) == 2 and "a1" in report["sessions"]

    assert _grep(ws, "canary") == set()
    assert run_cli("verify", cwd=ws, env=ENV).returncode == 0
    against = run_cli("verify", "--against", str(ws / "seal.json"), cwd=ws, env=ENV)
    assert against.returncode == 0, against.stdout
    # the same passages (scores are relative to the whole table, so they may move)
    assert (
        _recall(json.loads(_cli(ws, "query", "zebra", "-k", "100", "--json", user="ben"))["hits"])
        == ben_recall
    )
    assert _cli(ws, "context", "b1", "--budget", "800", "--query", "zebra", user="ben") == (
        ben_context
    )
    state = ws / ".airsspec" / "state"
    tiers = {t: snapshot(state / t) for t in ("hot", "learnings")}
    library = snapshot(ws / ".airsspec" / "knowledge" / "library")
    _cli(ws, "rebuild", "--jobs", "1")
    assert {t: snapshot(state / t) for t in ("hot", "learnings")} == tiers
    assert snapshot(ws / ".airsspec" / "knowledge" / "library") == library
    # the same passages (scores are relative to the whole table, so they may move)
    assert (
        _recall(json.loads(_cli(ws, "query", "zebra", "-k", "100", "--json", user="ben"))["hits"])
        == ben_recall
    )
    assert _grep(ws, "canary") == set()
    removed = json.loads(
        _cli(
            ws,
            "sql",
            "SELECT path, sha256 FROM events WHERE type = 'source_indexed' ORDER BY seq",
            "--json",
        )
    )
    assert removed[-1] == {"path": "users/ana/notes.md", "sha256": None}


def test_forgetting_one_session_keeps_the_others_of_its_owner(tmp_path: Path, env: None) -> None:
    _workspace(tmp_path, "session")
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append("a1", {"type": "user", "content": "CANARY first session"})
        ana.append("a2", {"type": "user", "content": "kept second session"})
        memory.project()
        with pytest.raises(NoSuchSessionError):  # ana's: as if there were none
            memory.scoped(user="ben").forget(session="a1")
        done = ana.forget(session="a1")
        assert done.sessions == ["a1"] and done.keys_destroyed == 1
        assert [r.content for r in memory.replay("a2") if r.type == "user"] == [
            "kept second session"
        ]
        assert memory.verify().ok
    assert _files_holding(tmp_path, b"CANARY") == []


def test_forget_is_refused_where_it_cannot_shred(tmp_path: Path, env: None) -> None:
    _workspace(tmp_path, "off")
    with Memory.open(tmp_path) as memory:
        memory.append("s1", {"type": "user", "content": "in the clear"})
        with pytest.raises(ForgetError, match="not encrypted"):
            memory.forget(session="s1")
    refused = run_cli("forget", "--session", "s1", cwd=tmp_path, env=ENV)
    assert refused.returncode != 0 and refused.stderr.decode().count("\n") == 1
    assert refused.stderr.decode().startswith("airsspec: error:")
    usage = run_cli("forget", cwd=tmp_path, env=ENV)
    assert usage.returncode == 2


def test_forgetting_one_session_in_user_mode_keeps_the_users_other_sessions(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append("a1", {"type": "user", "content": "CANARY said in the first session"})
        ana.append("a2", {"type": "user", "content": "kept second session"})
        ana.learnings.add("kept learning of ana")
        memory.project()
        done = ana.forget(session="a1")
        assert done.sessions == ["a1"] and done.keys_destroyed == 1
        assert [r.content for r in memory.replay("a1") if r.type == "user"] == [FORGOTTEN]
        assert [r.content for r in memory.replay("a2") if r.type == "user"] == [
            "kept second session"
        ]
        assert [item.text for item in ana.learnings.list().learnings] == ["kept learning of ana"]
        assert memory.verify().ok
    assert _files_holding(tmp_path, b"CANARY") == []
    with Memory.open(tmp_path) as memory:  # the user's key still shreds all that is left
        memory.forget(user="ana")
        assert [r.content for r in memory.replay("a2") if r.type == "user"] == [FORGOTTEN]
        assert memory.learnings.list().learnings == []


def test_a_session_sealed_under_its_users_key_alone_is_refused_and_nothing_changes(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _workspace(tmp_path, "user")
    # records as written before session keys were nested in user keys
    monkeypatch.setattr(Sealer, "kid", lambda self, s, body: key_id(self.subject(s, body)))
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "old record"})
        memory.project()
    monkeypatch.undo()

    def kept() -> dict[str, bytes]:  # all but the embedding cache (SQLite checkpoints it)
        return {k: v for k, v in snapshot(tmp_path).items() if "/caches/" not in k}

    before = kept()
    refused = run_cli("forget", "--session", "a1", cwd=tmp_path, env=ENV)
    assert refused.returncode != 0 and refused.stderr.decode().count("\n") == 1
    assert "sealed under the key of user ana alone" in refused.stderr.decode()
    assert "forget --user ana" in refused.stderr.decode()
    assert kept() == before


def test_a_log_written_without_encryption_stays_byte_identical(tmp_path: Path, env: None) -> None:
    _workspace(tmp_path, "off")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "plain"})
        assert memory.workspace.log.sealer is None
    assert not (tmp_path / ".airsspec" / "state" / "keys").exists()
    assert b'"content":"plain"' in snapshot(tmp_path / ".airsspec" / "contexts")["agent/a1.jsonl"]


# ------------------------------------------------------------------ property

bodies = st.one_of(
    st.builds(lambda t: {"type": "user", "content": t}, st.text(max_size=40)),
    st.builds(lambda t: {"type": "thought", "content": t, "meta": {"k": t}}, st.text()),
    st.builds(
        lambda p: {"type": "action", "tool": "Edit", "params": p},
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
    ),
    st.builds(lambda r: {"type": "observation", "result": r}, st.text() | st.integers()),
    st.builds(
        lambda t, u: {"type": "session_started", "task": t} | ({"user": u} if u else {}),
        st.text(min_size=1, max_size=10) | st.none(),
        st.sampled_from([None, "ana"]),
    ),
)


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(bodies, min_size=1, max_size=6), mode=st.sampled_from(["user", "session"]))
def test_sealing_then_opening_gives_back_every_body(
    tmp_path_factory: pytest.TempPathFactory, batch, mode
) -> None:
    keys = FileKeyStore(tmp_path_factory.mktemp("keys"))
    clear = input_bodies(batch)
    sealed = [dict(b) for b in clear]
    Sealer(mode, keys).seal_all("s1", sealed)
    for before, after in zip(clear, sealed, strict=True):
        if "sealed" in after:
            assert "meta" not in after and "origin" not in after
            opened = Sealer(mode, keys).open({**after, "session": "s1"})
            assert opened == {**before, "session": "s1"}
        else:
            names = (*CONTENT_FIELDS.get(before["type"], {}), "meta", "origin")
            assert all(before.get(n) is None for n in names)


def test_a_bad_privacy_setting_is_refused_naming_the_key(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    with (tmp_path / "airsspec.toml").open("a") as f:
        f.write('\n[privacy]\nencrypt = "yes"\n')
    refused = run_cli("sessions", cwd=tmp_path, env=ENV)
    assert refused.returncode == 2
    assert "[privacy] encrypt" in refused.stderr.decode()
    assert refused.stderr.decode().count("\n") == 1


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    appends=st.lists(
        st.tuples(st.sampled_from(["u", "v"]), st.integers(0, 2), st.integers(1, 12)),
        min_size=1,
        max_size=6,
    )
)
def test_forget_leaves_every_file_tier_as_a_rebuild_would(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, appends
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    root = _workspace(tmp_path_factory.mktemp("forget"), "user")
    tiers = ("hot", "warm", "learnings")
    with Memory.open(root) as memory:
        for user, n, count in appends:
            events = [{"type": "user", "content": f"{user} always says {i}"} for i in range(count)]
            memory.scoped(user=user).append_many(f"{user}{n}", events)
        memory.project()
        compactable = [s for s in memory.workspace.log.sessions() if s.startswith(("u", "v"))]
        for session in compactable[:1]:
            with contextlib.suppress(NothingToCompactError):  # too few messages
                memory.compact(session, force=True)
        if any(user == "u" for user, _, _ in appends):
            memory.forget(user="u")
        state = memory.root / "state"
        after = {t: snapshot(state / t) for t in ("hot", "learnings")}
        library = snapshot(memory.root / "knowledge" / "library")
        memory.rebuild(tiers)
        assert {t: snapshot(state / t) for t in ("hot", "learnings")} == after
        assert snapshot(memory.root / "knowledge" / "library") == library


# ------------------------------------------------------------------ key providers


class DictKms:
    """A KMS held in a dict, as one callable (``eventlog.keystores.KeyCallback``)."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes] = {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, action: str, kid: str) -> bytes | bool | None:
        self.calls.append((action, kid))
        if action == "destroy":
            return self.keys.pop(kid, None) is not None
        if action == "create":
            self.keys.setdefault(kid, os.urandom(32))
        return self.keys.get(kid)


KMS = DictKms()


def kms_factory() -> DictKms:
    """What an installed key store's entry point (``[privacy] keys = "kms"``) names."""
    return KMS


def test_keys_from_a_kms_callback_seal_open_and_are_destroyed_by_forget(
    tmp_path: Path, env: None
) -> None:
    _workspace(tmp_path, "user")
    kms = DictKms()
    with Memory.open(tmp_path, keys=kms) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "CANARY via kms"})
        assert [r.content for r in memory.replay("a1") if r.type == "user"] == ["CANARY via kms"]
        made = set(kms.keys)
        assert key_id("user:ana") in made and key_id("session:a1") in made
        memory.forget(user="ana")
        assert ("destroy", key_id("user:ana")) in kms.calls and kms.keys == {}
        assert [r.content for r in memory.replay("a1") if r.type == "user"] == [FORGOTTEN]
    assert not (tmp_path / ".airsspec" / "state" / "keys").exists()  # no key file was made
    assert _files_holding(tmp_path, b"CANARY") == []


def test_a_kms_that_fails_or_gives_a_bad_key_is_a_key_store_error(
    tmp_path: Path, env: None
) -> None:
    from eventlog.crypto import KeyStoreError

    _workspace(tmp_path, "session")

    def down(action: str, kid: str) -> bytes:
        raise ConnectionError("kms unreachable")

    for broken, said in ((down, "kms unreachable"), (lambda a, k: b"short", "not 32 bytes")):
        with Memory.open(tmp_path, keys=broken) as memory, pytest.raises(KeyStoreError, match=said):
            memory.append("s1", {"type": "user", "content": "never stored"})
    assert _files_holding(tmp_path, b"never stored") == []


def test_privacy_keys_names_a_key_store_factory_every_command_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata
    from importlib.metadata import EntryPoint, EntryPoints

    import eventlog.keystores

    point = EntryPoint("kms", f"{__name__}:kms_factory", eventlog.keystores.ENTRY_POINT_GROUP)
    installed = type("Dist", (), {"entry_points": EntryPoints([point])})
    # the key stores are listed from importlib.metadata when a config names one (imported then)
    monkeypatch.setattr(importlib.metadata, "distributions", lambda path: [installed])
    _workspace(tmp_path, "session")
    with (tmp_path / "airsspec.toml").open("a") as f:
        f.write('keys = "kms"\n')
    KMS.keys.clear()
    with Memory.open(tmp_path) as memory:
        memory.append("s1", {"type": "user", "content": "sealed by the factory's kms"})
        assert set(KMS.keys) == {key_id("session:s1")}
    assert not (tmp_path / ".airsspec" / "state" / "keys").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    _workspace(bad, "session")
    with (bad / "airsspec.toml").open("a") as f:
        f.write('keys = "no such thing"\n')
    refused = run_cli("sessions", cwd=bad, env=ENV)
    assert refused.returncode == 2 and "[privacy] keys" in refused.stderr.decode()


def test_a_forget_stops_this_process_opening_the_records_at_once_nested_keys_too(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import airsspec.forgetting
    import eventlog.crypto

    # forget waits for what other processes keep, not for this process's hour-long keeping
    # below (the wait is read from the recheck when forgetting is first imported, which this
    # test could be the first in its worker to do)
    kept = eventlog.crypto.KEY_RECHECK_SECONDS
    monkeypatch.setattr(airsspec.forgetting, "KEPT_KEY_SECONDS", kept)
    monkeypatch.setattr(eventlog.crypto, "KEY_RECHECK_SECONDS", 3600.0)  # no help from expiry
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append("a1", {"type": "user", "content": "CANARY held in a cached cipher"})
        memory.project()
        assert [r.content for r in memory.replay("a1") if r.type == "user"] == [
            "CANARY held in a cached cipher"
        ]
        memory.forget(session="a1")  # a1's records are sealed under a nested key
        assert [r.content for r in memory.replay("a1") if r.type == "user"] == [FORGOTTEN]
    assert _files_holding(tmp_path, b"CANARY") == []


def _two_machines(tmp_path: Path, bucket_url: str, endpoint: str) -> dict[str, Path]:
    """Workspaces ``a`` and ``b`` sharing the bucket ``bucket_url``, encrypted per user, their
    summaries extractive."""
    from tests.conftest import bucket_config
    from tests.support.logs import use_extractive_summarizer

    machines = {m: tmp_path / m for m in "ab"}
    for root in machines.values():
        root.mkdir()
        init_workspace(root)
        use_extractive_summarizer(root / "airsspec.toml")
        bucket_config(root, bucket_url, endpoint, (root / "airsspec.toml").read_text())
        with (root / "airsspec.toml").open("a") as f:
            f.write('[privacy]\nencrypt = "user"\n')
    return machines


@pytest.mark.s3
def test_a_forget_run_on_one_machine_is_followed_by_another_sharing_the_bucket(
    tmp_path: Path, moto_endpoint: str, bucket_url: str, env: None
) -> None:
    """Machine b holds ana's content in its own folder (hot window, library, embedding cache,
    a document of hers); machine a forgets her; b's next ``project`` leaves none of it."""
    import sqlite3

    from projections.embedding_cache import text_sha256

    machines = _two_machines(tmp_path, bucket_url, moto_endpoint)
    a, b = machines["a"], machines["b"]
    said = [f"CANARYREMOTE{i} the staging vault rotates on Mondays" for i in range(30)]
    document = b / ".airsspec" / "sources" / "users" / "ana" / "notes.md"
    document.parent.mkdir(parents=True)
    document.write_text("# Notes\n\nCANARYREMOTEDOC the vault sits in eu-west.\n")
    with Memory.open(b) as memory:
        memory.scoped(user="ana").append_many(
            "a1", [{"type": "user", "content": text} for text in said]
        )
        memory.scoped(user="ben").append_many(
            "b1", [{"type": "user", "content": f"ben zebra {i}"} for i in range(12)]
        )
        memory.compact("a1", force=True)
        memory.project("all")
        ben_before = memory.scoped(user="ben").context("b1", 600)
    cache = b / ".airsspec" / "state" / "caches" / "embeddings.sqlite"
    with contextlib.closing(sqlite3.connect(cache)) as db:
        cached = {row[0] for row in db.execute("SELECT text_sha256 FROM embeddings")}
    assert text_sha256(said[0]) in cached, "b never embedded ana's messages"
    found = _grep(b, "canaryremote")
    assert any("/hot/" in f for f in found) and any("library" in f for f in found), found

    _cli(a, "forget", "--user", "ana", "--by", "dpo")
    assert _grep(b, "canaryremote"), "b's copies went before b looked at the log"
    _cli(b, "project")

    assert _grep(b, "canaryremote") == set()
    with contextlib.closing(sqlite3.connect(cache)) as db:
        cached = {row[0] for row in db.execute("SELECT text_sha256 FROM embeddings")}
    assert not {text_sha256(text) for text in said} & cached
    assert text_sha256("ben zebra 3") in cached  # ben's vectors stay
    assert run_cli("verify", cwd=b, env=ENV).returncode == 0
    with Memory.open(b) as memory:
        assert memory.scoped(user="ben").context("b1", 600) == ben_before
        hits = memory.search("staging vault rotates in eu-west", k=20)["hits"]
        assert not [h for h in hits if h["session"] == "a1" or h.get("source")]


def test_a_damaged_follow_mark_is_read_from_the_start_never_trusted_to_skip_a_forget(
    tmp_path: Path, env: None, caplog: pytest.LogCaptureFixture
) -> None:
    """``state/forgotten.json`` is derived state: one that names no record of the workspace
    log (past its end, negative, in the middle of a line, a seq the line there does not
    carry, unreadable) is read as 'never looked', so the ``forgotten`` event is followed
    again, without a warning that the log is damaged (it is not), and the mark is
    written sound."""
    import logging

    from airsspec.kernel.purge import follow

    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "CANARY vault"})
        memory.scoped(user="ben").append("b1", {"type": "user", "content": "ben's own"})
        memory.project()
        memory.forget(user="ana")
        path = memory.workspace.layout.forgotten_path
        sound = json.loads(path.read_text())
        assert follow(memory.kernel) == []  # followed here already
        damaged = {
            "past the end": {"seq": sound["seq"], "offset": 10**12},
            "negative": {"seq": -5, "offset": -100},
            "mid-line": {"seq": sound["seq"], "offset": sound["offset"] - 7},
            "fraction": {"seq": sound["seq"], "offset": 1.5},
            "wrong seq": {"seq": 10**9, "offset": sound["offset"]},
            "seq at the start": {"seq": 3, "offset": 0},
        }
        for name, mark in damaged.items():
            path.write_text(json.dumps(mark))
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                assert "a1" in follow(memory.kernel), name
            assert not caplog.records, (name, caplog.text)
            assert json.loads(path.read_text()) == sound, name
        path.write_bytes(b"\x00{garbage")
        assert "a1" in follow(memory.kernel)
        assert json.loads(path.read_text()) == sound
        assert [r.content for r in memory.replay("b1") if r.type == "user"] == ["ben's own"]
    assert _files_holding(tmp_path, b"CANARY") == []


@pytest.mark.s3
def test_a_machine_whose_embedder_cannot_run_still_follows_a_forget_into_its_cold_files(
    tmp_path: Path,
    moto_endpoint: str,
    bucket_url: str,
    env: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Machine b embedded ana's messages, then its embedder cannot run (a model gone) when it
    follows a forget run on machine a: its cold checkpoints (which hold a message's text) and
    its embedding cache must go as ``forget`` drops them there, not stay for good."""
    import sqlite3

    from projections.embedding_cache import text_sha256

    machines = _two_machines(tmp_path, bucket_url, moto_endpoint)
    a, b = machines["a"], machines["b"]
    said = [f"CANARYCOLD{i} the staging vault rotates on Mondays" for i in range(5)]
    with Memory.open(b) as memory:
        memory.scoped(user="ana").append_many("a1", [{"type": "user", "content": t} for t in said])
        memory.scoped(user="ben").append("b1", {"type": "user", "content": "ben zebra"})
        memory.project("all")
    assert _grep(b, "canarycold")
    _cli(a, "forget", "--user", "ana", "--by", "dpo")

    monkeypatch.setattr(Memory, "embedder_problem", lambda self: "no model here")
    with Memory.open(b) as memory:
        memory.project(("hot",))
    assert _grep(b, "canarycold") == set()
    cache = b / ".airsspec" / "state" / "caches" / "embeddings.sqlite"
    if cache.exists():
        with contextlib.closing(sqlite3.connect(cache)) as db:
            cached = {row[0] for row in db.execute("SELECT text_sha256 FROM embeddings")}
        assert not {text_sha256(text) for text in said} & cached
    monkeypatch.undo()
    with Memory.open(b) as memory:  # the embedder is back: the cold tier resumes
        hits = memory.search("ben zebra", k=5)["hits"]
        assert [h["session"] for h in hits] == ["b1"]


def test_following_many_forget_events_takes_them_one_after_another_not_nested(
    tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine that missed many forgets (offline a while, or its mark lost) follows each
    from the same depth: the refold after one does not follow the next inside it (some 200
    events nested past Python's recursion limit: RecursionError on every read), and
    ``follow`` names every session it dropped."""
    import inspect

    import airsspec.kernel.purge

    _workspace(tmp_path, "user")
    users = [f"u{i}" for i in range(6)]
    with Memory.open(tmp_path) as memory:
        for user in users:
            memory.scoped(user=user).append(f"s-{user}", {"type": "user", "content": "CANARY"})
        memory.project()
        for user in users:
            memory.forget(user=user)
        memory.workspace.layout.forgotten_path.unlink()  # as a machine that never looked

        depths = []
        follow_one = airsspec.kernel.purge._follow_one

        def measured(memory: Memory, located: object) -> list[str]:
            depths.append(len(inspect.stack(0)))
            return follow_one(memory, located)

        monkeypatch.setattr(airsspec.kernel.purge, "_follow_one", measured)
        followed = airsspec.kernel.purge.follow(memory.kernel)
        assert len(depths) == len(users)
        assert len(set(depths)) == 1, depths
        assert {f"s-{user}" for user in users} <= set(followed)
        assert airsspec.kernel.purge.follow(memory.kernel) == []


def test_following_a_forget_again_keeps_the_documents_the_user_added_since(
    tmp_path: Path, env: None
) -> None:
    """A machine that follows a forget again (its mark lost or damaged: ``state/`` is
    disposable) removes what the forget covered, not a document of the same user
    registered after it: that one is new, and its file under ``sources/`` may be the only
    copy."""
    from airsspec.kernel.purge import follow

    _workspace(tmp_path, "user")
    folder = tmp_path / ".airsspec" / "sources" / "users" / "ana"
    folder.mkdir(parents=True)
    (folder / "old.md").write_text("# Old\n\nCANARY the vault sits in eu-west.\n")
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "CANARY vault"})
        memory.project()
        memory.forget(user="ana")
        assert not folder.exists()
        (folder / "notes").mkdir(parents=True)
        (folder / "notes" / "new.md").write_text("# New\n\nwritten after the forget\n")
        memory.project()  # registered
        memory.workspace.layout.forgotten_path.unlink()
        assert "a1" in follow(memory.kernel)
        assert (folder / "notes" / "new.md").read_text() == "# New\n\nwritten after the forget\n"
        hits = memory.search("written after the forget", k=3)["hits"]
        assert hits and hits[0]["source"] == "users/ana/notes/new.md"
    assert _files_holding(tmp_path, b"CANARY") == []


def test_a_learnings_edited_text_is_searchable_until_its_owner_is_forgotten(
    tmp_path: Path, env: None
) -> None:
    """A person's edit of a learning is a search unit of its own (its current text): it is
    found by the owner's scope and not by another user's, and forgetting the owner leaves it
    nowhere under the workspace."""
    _workspace(tmp_path, "user")
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        ana.append("a1", {"type": "user", "content": "a first session"})
        added = ana.learnings.add("deploys go out on fridays", scope="project").learning_id
        memory.learnings.edit(added, text="EDITCANARY deploys go out on tuesdays", by="admin")
        memory.project()
        assert [h["text"] for h in ana.search("EDITCANARY", kinds=["learning"])["hits"]] == [
            "EDITCANARY deploys go out on tuesdays"
        ]
        ben = memory.scoped(user="ben")
        assert ben.search("EDITCANARY", kinds=["learning"])["hits"] == []
        assert _files_holding(tmp_path, b"EDITCANARY")  # in the clear somewhere: the index
        memory.forget(user="ana")
        assert memory.search("EDITCANARY", kinds=["learning"])["hits"] == []
    assert _files_holding(tmp_path, b"EDITCANARY") == []


@pytest.mark.s3
def test_on_a_bucket_every_machine_seals_a_users_records_for_them_and_her_forget_finds_them(
    tmp_path: Path, moto_endpoint: str, bucket_url: str, env: None
) -> None:
    """Ana starts a1 on machine a; machine b appends to it for her, then an admin on b gives
    it to ben: b sealed her record under her key too (it read her owner from the bucket, not
    its own empty folder), so forgetting her leaves none of her words readable."""
    import orjson

    from eventlog.crypto import kid_parts

    machines = _two_machines(tmp_path, bucket_url, moto_endpoint)
    with Memory.open(machines["a"]) as a:
        a.scoped(user="ana").append("a1", {"type": "user", "content": "CANARYA on a"})
    with Memory.open(machines["b"]) as b:
        b.scoped(user="ana").append("a1", {"type": "user", "content": "CANARYB on b"})
        b.sessions.assign("a1", user="ben")
        log_dir = b.workspace.log.log_dir  # on a bucket: its synced cache
    stored = [orjson.loads(line) for line in (log_dir / "a1.jsonl").read_bytes().splitlines()]
    said = [body["sealed"]["kid"] for body in stored if body["type"] == "user"]
    assert len(said) == 2 and all(key_id("user:ana") in kid_parts(kid) for kid in said), said
    with Memory.open(machines["b"]) as b:
        b.forget(user="ana")
        assert [r.content for r in b.replay("a1") if r.type == "user"] == [FORGOTTEN] * 2

"""The ways around the log are closed, each driven as an attacker or a careless user would:
symbolic links, forged system events, cut or re-chained logs (heads and seals), secrets in clear,
session ids that collide ignoring case, and settings that depend on where a command runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli
from tests.support.logs import edit_config

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}
ANTHROPIC_KEY = "sk-ant-api03-" + "Qx7_" * 23 + "AA"
AWS_KEY = "AKIAQWERTYUIOPASDFGH"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAr9x\n-----END RSA PRIVATE KEY-----"
SECRETS = (ANTHROPIC_KEY, AWS_KEY, "MIIEowIBAAKCAQEAr9x")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    return tmp_path


def logs(project: Path) -> Path:
    return project / ".airsspec" / "contexts" / "agent"


def append(project: Path, session: str, *contents: str, **kw) -> object:
    lines = "".join(json.dumps({"type": "user", "content": c}) + "\n" for c in contents)
    return run_cli("append", session, cwd=project, stdin=lines.encode(), **kw)


# --------------------------------------------------------------------------- 3: symbolic links


def test_a_dangling_link_in_place_of_a_log_is_never_written_through(project: Path) -> None:
    target = project.parent / f"{project.name}-outside.jsonl"
    (logs(project) / "y.jsonl").symlink_to(target)
    result = append(project, "y", "hello")
    assert result.returncode == 2
    assert b"y.jsonl: is a symbolic link" in result.stderr
    assert not target.exists()


def test_verify_never_truncates_a_linked_file_outside(project: Path) -> None:
    outside = project.parent / f"{project.name}-precious.txt"
    outside.write_bytes(b"precious bytes, no trailing newline")
    (logs(project) / "v.jsonl").symlink_to(outside)
    result = run_cli("verify", cwd=project)
    assert result.returncode == 1
    assert b"v.jsonl: is a symbolic link" in result.stdout
    assert outside.read_bytes() == b"precious bytes, no trailing newline"
    assert not (logs(project) / "v.jsonl.quarantine").exists()


def test_a_linked_source_file_is_never_indexed(project: Path) -> None:
    outside = project.parent / f"{project.name}-passwd.txt"
    outside.write_text("root:x:0:0:zanzibar quokka:/root:/bin/bash\n")
    sources = project / ".airsspec" / "sources"
    (sources / "passwd.txt").symlink_to(outside)
    (sources / "notes.md").write_text("# Notes\nThe quokka lives in Rottnest.\n")
    append(project, "s", "something else")
    result = run_cli("query", "zanzibar quokka", "--json", cwd=project, env=HASH)
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)["hits"]
    assert any(h["source"] == "notes.md" for h in hits)  # sources are indexed...
    assert not any("zanzibar" in h["text"] for h in hits)  # ...but not through a link
    assert b"passwd.txt is a symbolic link; not indexed" in result.stderr


def test_a_linked_state_file_is_not_served(project: Path) -> None:
    append(project, "alpha", "hello")
    assert run_cli("project", "--tier", "hot", cwd=project).returncode == 0
    hot = project / ".airsspec" / "state" / "hot" / "alpha.json"
    outside = project.parent / f"{project.name}-forged-hot.json"
    shutil.copy(hot, outside)
    outside.write_text(outside.read_text().replace("hello", "INJECTED TEXT"))
    hot.unlink()
    hot.symlink_to(outside)
    result = run_cli("hot", "alpha", "--budget", "100", cwd=project)
    assert b"INJECTED TEXT" not in result.stdout
    assert b"Traceback" not in result.stderr


# --------------------------------------------------------------------------- 4: forged events


def test_a_hand_typed_compaction_is_refused(project: Path) -> None:
    append(project, "s", "one", "two")
    before = snapshot(project)
    forged = {
        "type": "compaction",
        "library_no": 1,
        "from_seq": 1,
        "to_seq": 1,
        "first_hash": "0" * 64,
        "last_hash": "0" * 64,
        "messages": 1,
        "chunks": [{"from_seq": 1, "to_seq": 1, "messages": 1, "summary": "x", "tokens": 1}],
        "summary": "FORGED SUMMARY",
        "summary_tokens": 2,
        "summarizer": {"backend": "x", "model": "x", "prompt_version": "1"},
        "tokens_before": 1,
        "tokens_after": 1,
        "reason": "forced",
    }
    result = run_cli("append", "s", cwd=project, stdin=json.dumps(forged).encode())
    assert result.returncode == 2
    assert b"'compaction' events are written by airsspec itself" in result.stderr
    assert snapshot(project) == before
    assert run_cli("verify", cwd=project).returncode == 0


# --------------------------------------------------------------------------- 5: heads and seals


@pytest.mark.parametrize("damage", ["cut", "cut inside a batch", "emptied", "deleted"])
def test_a_log_cut_at_a_record_boundary_fails_verify(project: Path, damage: str) -> None:
    append(project, "s", "one")
    append(project, "s", "two", "three")  # one batch of two
    log = logs(project) / "s.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    if damage == "cut":
        log.write_bytes(b"".join(lines[:1]))
    elif damage == "cut inside a batch":  # looks like a torn batch, but it was acknowledged
        log.write_bytes(b"".join(lines[:2]))
    elif damage == "emptied":
        log.write_bytes(b"")
    else:
        log.unlink()
    before = snapshot(project)
    result = run_cli("verify", cwd=project)
    assert result.returncode == 1
    assert b"FAIL s:" in result.stdout
    assert b"head names seq 3" in result.stdout
    assert snapshot(project) == before  # nothing quarantined, nothing repaired


def test_a_rechained_forgery_with_its_head_is_caught_by_an_earlier_seal(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    append(project, "s", "pay alice 10", "pay bob 20")
    keep = tmp_path_factory.mktemp("auditor")
    (keep / "key").write_bytes(b"k" * 32)
    sealed = run_cli("seal", "--key", str(keep / "key"), "-o", str(keep / "seal.json"), cwd=project)
    assert sealed.returncode == 0, sealed.stderr
    # The forger writes a different history with a valid chain and head, and swaps it in.
    forger = tmp_path_factory.mktemp("forger")
    init_workspace(forger)
    append(forger, "s", "pay mallory 10", "pay mallory 20")
    for name in ("s.jsonl", "s.head"):
        shutil.copy(logs(forger) / name, logs(project) / name)
    assert run_cli("verify", cwd=project).returncode == 0  # the chain alone cannot tell
    checked = run_cli(
        "verify", "--against", str(keep / "seal.json"), "--key", str(keep / "key"), cwd=project
    )
    assert checked.returncode == 1
    assert b"is not the one the seal" in checked.stdout


def test_an_edited_seal_is_refused(project: Path) -> None:
    append(project, "s", "one")
    key = project / "seal.key"
    key.write_bytes(b"0123456789abcdef0123")
    seal = project / "seal.json"
    assert run_cli("seal", "--key", str(key), "-o", str(seal), cwd=project).returncode == 0
    assert run_cli("verify", "--against", str(seal), "--key", str(key), cwd=project).returncode == 0
    data = json.loads(seal.read_text())
    data["sessions"]["s"]["seq"] = 0
    seal.write_text(json.dumps(data))
    result = run_cli("verify", "--against", str(seal), "--key", str(key), cwd=project)
    assert result.returncode == 2
    assert b"airsspec: error: the seal's signature is wrong" in result.stderr


# --------------------------------------------------------------------------- 6: secrets


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]


def test_secrets_are_redacted_before_anything_is_written(project: Path) -> None:
    text = f"use {ANTHROPIC_KEY} and {AWS_KEY}\n{PEM}\nthanks"
    result = run_cli(
        "append",
        "s",
        "--json",
        cwd=project,
        stdin=json.dumps({"type": "user", "content": text, "meta": {"k": AWS_KEY}}).encode(),
    )
    assert result.returncode == 0, result.stderr
    (record,) = json.loads(result.stdout)
    assert {(r["path"], r["kind"]) for r in record["redacted"]} == {
        ("content", "anthropic-api-key"),
        ("content", "aws-access-key"),
        ("content", "private-key-block"),
        ("meta.k", "aws-access-key"),
    }
    assert "[REDACTED:anthropic-api-key:" in record["content"]
    assert record["content"].endswith("\nthanks")
    assert run_cli("project", cwd=project, env=HASH).returncode == 0
    assert run_cli("export", "parquet", str(project / "pq"), cwd=project).returncode == 0
    query = run_cli("query", "anthropic key", "--json", cwd=project, env=HASH)
    assert b"REDACTED" in query.stdout
    files = _files_under(project / ".airsspec") + _files_under(project / "pq")
    assert len(files) > 5
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, path
    for secret in SECRETS:
        assert secret.encode() not in query.stdout
    assert run_cli("verify", cwd=project).returncode == 0


def test_imports_redact_and_report_unless_told_to_keep_secrets(project: Path) -> None:
    transcript = project / "leaky.jsonl"
    lines = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
        {"type": "user", "uuid": "u2", "message": {"role": "user", "content": f"key {AWS_KEY}"}},
    ]
    transcript.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
    result = run_cli("import", "claude-code", str(transcript), cwd=project)
    assert result.returncode == 0, result.stderr
    assert b"redacted a secret at seq 2 origin.text (aws-access-key)" in result.stdout
    assert AWS_KEY.encode() not in (logs(project) / "leaky.jsonl").read_bytes()
    kept = run_cli(
        "import",
        "claude-code",
        str(transcript),
        "--keep-secrets",
        "--session-prefix",
        "k-",
        cwd=project,
    )
    assert kept.returncode == 0
    exported = run_cli("export", "claude-code", "k-leaky", cwd=project)
    assert exported.stdout == transcript.read_bytes()


# --------------------------------------------------------------------------- 7 and 8


@pytest.mark.parametrize("second", ["Case", "CASE", "cAsE"])
def test_session_ids_differing_only_in_case_are_refused(project: Path, second: str) -> None:
    assert append(project, "case", "first").returncode == 0
    before = snapshot(project)
    result = append(project, second, "second")
    assert result.returncode == 2
    assert b"differs only in case" in result.stderr
    assert snapshot(project) == before


@pytest.mark.parametrize("session", ["COM0", "lpt0", "com0.log"])
def test_reserved_device_names_are_refused(project: Path, session: str) -> None:
    result = append(project, session, "x")
    assert result.returncode == 2
    assert b"not a portable file name" in result.stderr


def test_a_workspace_uses_its_own_settings_wherever_the_command_runs(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = project / "airsspec.toml"
    edit_config(config, ("hot_window_size = 30", "hot_window_size = 2"))
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "airsspec.toml").write_text("[memory]\nhot_window_size = 5\n")
    workspace = str(project / ".airsspec")
    assert append(project, "s", "a", "b", "c", "d").returncode == 0
    for cwd in (project, elsewhere):
        assert run_cli("-w", workspace, "rebuild", "--tier", "hot", cwd=cwd).returncode == 0
        window = json.loads(run_cli("-w", workspace, "hot", "s", "--json", cwd=cwd).stdout)
        assert [e["seq"] for e in window["entries"]] == [3, 4]

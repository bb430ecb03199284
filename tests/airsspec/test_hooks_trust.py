"""The hooks act only on a project whose ``airsspec.toml`` this user trusted: a cloned
repository's config chooses where the conversation goes (a folder git commits, one outside the
project, a bucket), so the hooks leave it alone until ``airsspec trust`` is run in it, and again
when where it sends what is captured changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airsspec import trust
from tests.conftest import claude_transcript, init_workspace, snapshot
from tests.support.cli import run_cli

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


@pytest.fixture
def cloned(tmp_path: Path) -> Path:
    """A repository as cloned: its own airsspec.toml (written by no ``init`` here), naming a
    workspace folder outside the repository."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "airsspec.toml").write_text('[workspace]\npath = "../elsewhere"\n')
    return repo


def _hook(repo: Path, event: str, transcript: Path | None = None):
    payload = {"session_id": "s-1", "cwd": str(repo), "hook_event_name": event}
    if transcript is not None:
        payload["transcript_path"] = str(transcript)
    return run_cli("hook", event, cwd=repo.parent, env=HASH, stdin=json.dumps(payload).encode())


def _captured(repo: Path) -> bool:
    return (repo.parent / "elsewhere" / "contexts").is_dir() and any(
        (repo.parent / "elsewhere" / "contexts").rglob("*.jsonl")
    )


def test_a_cloned_projects_config_is_left_alone_until_trusted(cloned: Path) -> None:
    transcript = claude_transcript(cloned.parent / "s-1.jsonl", "the deploy key is in the vault")
    before = snapshot(cloned.parent)
    start = _hook(cloned, "SessionStart")
    err = start.stderr.decode()
    assert start.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("airsspec: error: ") and "not trusted" in err and "airsspec trust" in err
    stop = _hook(cloned, "Stop", transcript)  # said once a session: a capture exits quietly
    assert stop.returncode == 0 and stop.stderr == b"", stop.stderr
    assert snapshot(cloned.parent) == before  # nothing captured, no folder made anywhere
    trusted = run_cli("trust", "--json", cwd=cloned, env=HASH)
    assert trusted.returncode == 0, trusted.stderr
    shown = json.loads(trusted.stdout)
    assert shown["trusted"] and shown["workspace"] == str((cloned.parent / "elsewhere").resolve())
    assert _hook(cloned, "Stop", transcript).returncode == 0
    assert _captured(cloned)
    assert _hook(cloned, "SessionStart").returncode == 0


def test_trust_holds_for_the_routing_it_was_given_for(cloned: Path) -> None:
    """Another setting edited keeps the trust; the workspace folder, the storage, what is
    redacted or how it is encrypted changed (an edit, a pull) asks for it again; --revoke takes
    it back."""
    assert run_cli("trust", cwd=cloned, env=HASH).returncode == 0
    config = cloned / "airsspec.toml"
    config.write_text(config.read_text() + "[memory]\nhot_window_size = 12\n")
    assert _hook(cloned, "SessionStart").returncode == 0
    for moved in (
        '[workspace]\npath = "../somewhere-else"\n',
        '[workspace]\npath = "../elsewhere"\n[storage]\nurl = "s3://their-bucket/x"\n',
        '[workspace]\npath = "../elsewhere"\n[secrets]\nredact = false\n',
        '[workspace]\npath = "../elsewhere"\n[privacy]\nencrypt = "user"\n',
    ):
        config.write_text(moved)
        refused = _hook(cloned, "SessionStart")
        assert refused.returncode == 1 and b"not trusted" in refused.stderr, moved
    config.write_text('[workspace]\npath = "../elsewhere"\n')
    assert _hook(cloned, "SessionStart").returncode == 0  # the routing trusted, as it was
    revoked = run_cli("trust", "--revoke", cwd=cloned, env=HASH)
    assert revoked.returncode == 0 and b"no longer trusted" in revoked.stdout
    assert _hook(cloned, "SessionStart").returncode == 1


def test_init_and_install_in_a_project_trust_it(tmp_path: Path, cloned: Path) -> None:
    mine = tmp_path / "mine"
    init_workspace(mine)
    assert _hook(mine, "SessionStart").returncode == 0
    installed = run_cli("hooks", "install", "--project", str(cloned), "--json", cwd=cloned)
    assert installed.returncode == 0, installed.stderr
    assert json.loads(installed.stdout)["trusted"] == str(cloned / "airsspec.toml")
    assert _hook(cloned, "SessionStart").returncode == 0


def test_a_trusted_file_another_user_could_write_trusts_nothing(cloned: Path) -> None:
    assert run_cli("trust", cwd=cloned, env=HASH).returncode == 0
    kept = Path(os.environ["XDG_CONFIG_HOME"]) / "airsspec" / "trusted.json"
    mode = kept.stat().st_mode
    try:
        kept.chmod(0o666)
        assert _hook(cloned, "SessionStart").returncode == 1
    finally:
        kept.chmod(mode)
    assert _hook(cloned, "SessionStart").returncode == 0


def test_a_config_linked_to_a_trusted_one_is_not_trusted(tmp_path: Path) -> None:
    """A cloned repository's airsspec.toml as a link to a config trusted elsewhere: its
    workspace folder is the repository's (relative to the link), which no trust was given for,
    so the hooks leave it alone (they captured into the repository's .airsspec)."""
    mine = tmp_path / "mine"
    init_workspace(mine)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "airsspec.toml").symlink_to(Path("..") / "mine" / "airsspec.toml")
    transcript = claude_transcript(tmp_path / "s-1.jsonl", "the deploy key is in the vault")
    start = _hook(repo, "SessionStart")
    assert start.returncode == 1 and b"not trusted" in start.stderr, start.stderr
    assert _hook(repo, "Stop", transcript).returncode == 0
    assert not (repo / ".airsspec").exists()
    assert run_cli("trust", cwd=repo, env=HASH).returncode == 0  # trusted as what it is
    assert _hook(repo, "Stop", transcript).returncode == 0
    assert any((repo / ".airsspec" / "contexts").rglob("*.jsonl"))


def test_a_running_server_is_not_a_way_around_trust(tmp_path: Path) -> None:
    """A cloned repository's config naming the workspace of a running ``airsspec serve``: the
    light client sent its hooks to that server, past the check (the capture went into the
    user's workspace, the SessionStart memory into the repository's session)."""
    from airsspec.memory import Memory
    from airsspec.serve.app import serving
    from airsspec.serve.core import Served

    with Memory.open(tmp_path / "mine", create=True) as memory:
        repo = tmp_path / "repo"
        repo.mkdir()
        (repo / "airsspec.toml").write_text('[workspace]\npath = "../mine/.airsspec"\n')
        transcript = claude_transcript(tmp_path / "s-1.jsonl", "the deploy key is in the vault")
        served = Served(memory, local_user="owner", background=False)
        with serving(served, discover=True):
            start = _hook(repo, "SessionStart")
            assert start.returncode == 1 and b"not trusted" in start.stderr, start.stderr
            assert _hook(repo, "Stop", transcript).returncode == 0
            assert not any((memory.root / "contexts").rglob("*.jsonl"))
            assert _hook(tmp_path / "mine", "SessionStart").returncode == 0  # its own: served


def test_a_damaged_trusted_file_trusts_nothing_and_no_hook_fails_on_it(
    cloned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nested past the parser's depth (a RecursionError, not a ValueError): the hooks
    printed a traceback; now it trusts nothing, and trusting again writes it anew."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cloned.parent / "config"))
    kept = cloned.parent / "config" / "airsspec" / "trusted.json"
    kept.parent.mkdir(parents=True, mode=0o700)
    kept.write_text('{"trusted": ' + "[" * 100_000 + "]" * 100_000 + "}")
    kept.chmod(0o600)
    start = _hook(cloned, "SessionStart")
    assert start.returncode == 1 and start.stderr.count(b"\n") == 1, start.stderr
    assert b"not trusted" in start.stderr and b"Traceback" not in start.stderr
    stop = _hook(cloned, "Stop", claude_transcript(cloned.parent / "s-1.jsonl", "hello"))
    assert (stop.returncode, stop.stderr) == (0, b"")
    assert run_cli("trust", cwd=cloned, env=HASH).returncode == 0
    assert _hook(cloned, "SessionStart").returncode == 0


def test_trust_shows_the_endpoint_the_log_would_be_sent_to(cloned: Path) -> None:
    """A bucket's name says nothing of whose server it is on: ``[storage] endpoint`` is where
    the log goes, so what trust says it was given for names it (it showed the url alone)."""
    (cloned / "airsspec.toml").write_text(
        '[storage]\nurl = "s3://my-team/memory"\nendpoint = "https://s3.their-host.example"\n'
    )
    said = run_cli("trust", cwd=cloned, env=HASH)
    assert said.returncode == 0 and b"https://s3.their-host.example" in said.stdout, said.stdout
    shown = json.loads(run_cli("trust", "--json", cwd=cloned, env=HASH).stdout)
    assert shown["storage"] == "s3://my-team/memory"
    assert shown["endpoint"] == "https://s3.their-host.example"


def test_the_trusted_file_keeps_no_copy_of_a_storage_secret(cloned: Path) -> None:
    """The fingerprint covers ``[storage] secret_access_key``; the entry kept beside it copied
    the key itself into the user's config folder (a dotfiles repository takes it along)."""
    (cloned / "airsspec.toml").write_text(
        '[storage]\nurl = "s3://my-team/memory"\nsecret_access_key = "wJalrXUtnFEMIK7MDENG"\n'
    )
    assert run_cli("trust", cwd=cloned, env=HASH).returncode == 0
    kept = Path(os.environ["XDG_CONFIG_HOME"]) / "airsspec" / "trusted.json"
    assert b"wJalrXUtnFEMIK7MDENG" not in kept.read_bytes()
    assert trust.trusted(cloned / "airsspec.toml")  # the hooks would act on it


def test_a_config_that_no_longer_loads_can_still_be_revoked(cloned: Path) -> None:
    """Revoking opened the workspace, so a trusted config a pull broke (or one naming a key
    store no longer installed) could not be revoked, and was trusted again once it loaded."""
    assert run_cli("trust", cwd=cloned, env=HASH).returncode == 0
    config = cloned / "airsspec.toml"
    good = config.read_text()
    config.write_text(good + "[memory]\nhot_window_size = -1\n")
    revoked = run_cli("trust", "--revoke", cwd=cloned, env=HASH)
    assert revoked.returncode == 0 and b"no longer trusted" in revoked.stdout, revoked.stderr
    config.write_text(good)
    assert _hook(cloned, "SessionStart").returncode == 1
    assert run_cli("-c", str(config), "trust", "--revoke", cwd=cloned.parent).returncode == 0


def test_install_whose_trust_cannot_be_kept_leaves_the_settings_as_they_were(
    cloned: Path, tmp_path: Path
) -> None:
    """A config folder another user may write keeps no trust: ``hooks install`` in a project
    then fails before it edits Claude Code's settings (it edited them, then failed)."""
    (cloned / ".claude").mkdir()
    settings = cloned / ".claude" / "settings.local.json"
    settings.write_text('{"model": "opus"}\n')
    shared = tmp_path / "shared-config"
    (shared / "airsspec").mkdir(parents=True)
    (shared / "airsspec").chmod(0o777)
    env = {"XDG_CONFIG_HOME": str(shared)}
    result = run_cli("hooks", "install", "--project", str(cloned), cwd=cloned, env=env)
    err = result.stderr.decode()
    assert result.returncode != 0 and err.startswith("airsspec: error:") and "another user" in err
    assert settings.read_text() == '{"model": "opus"}\n'


def test_the_untrusted_line_is_one_line_whatever_the_path(tmp_path: Path) -> None:
    repo = tmp_path / "a\nb"
    repo.mkdir()
    (repo / "airsspec.toml").write_text('[workspace]\npath = ".airsspec"\n')
    start = _hook(repo, "SessionStart")
    err = start.stderr.decode()
    assert start.returncode == 1 and err.count("\n") == 1 and "a\\nb" in err, err


def test_a_workspace_path_through_a_link_loop_is_one_untrusted_line(cloned: Path) -> None:
    """A repository can commit a link to itself under its workspace path: resolving it fails
    (a loop). The hook still says one untrusted line at SessionStart and nothing at a capture
    (it crashed with a traceback at every event); ``trust`` refuses it in one line."""
    (cloned / "loop").symlink_to("loop")
    (cloned / "airsspec.toml").write_text('[workspace]\npath = "loop/x"\n')
    start = _hook(cloned, "SessionStart")
    err = start.stderr.decode()
    assert start.returncode == 1 and err.count("\n") == 1 and "not trusted" in err, err
    stop = _hook(cloned, "Stop")
    assert stop.returncode == 0 and stop.stderr == b"", stop.stderr
    refused = run_cli("trust", cwd=cloned, env=HASH)
    err = refused.stderr.decode()
    assert refused.returncode != 0 and err.startswith("airsspec: error:") and err.count("\n") == 1
    assert not trust.trusted(cloned / "airsspec.toml")


def test_a_config_nested_too_deep_is_one_untrusted_line(cloned: Path) -> None:
    """A repository's airsspec.toml nested deeper than the TOML parser recurses is not TOML
    to airsspec: one untrusted line at SessionStart, nothing at a capture (a traceback at
    every event)."""
    (cloned / "airsspec.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    start = _hook(cloned, "SessionStart")
    err = start.stderr.decode()
    assert start.returncode == 1 and err.count("\n") == 1 and "not trusted" in err, err
    stop = _hook(cloned, "Stop")
    assert stop.returncode == 0 and stop.stderr == b"", stop.stderr

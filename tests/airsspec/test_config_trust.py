"""Configuration never runs code from a repository: ``[privacy] keys`` names a key store (built
in, or declared by an installed distribution's entry point), never a module to import; the
distributions are looked up without the working directory; and the CLI and the installed hooks
never import from the folder they run in."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import eventlog.keystores as keystores
from airsspec import Memory, hooks
from airsspec.config import load_settings
from eventlog.crypto import key_id
from eventlog.errors import KeyStoreError, SettingsError
from tests.conftest import REPO, init_workspace
from tests.support.cli import run_cli

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}
EVIL = 'import pathlib\npathlib.Path({canary!r}).write_text("imported")\n\ndef keys():\n    pass\n'


def _repo(root: Path, keys: str) -> Path:
    """A cloned repository: a workspace whose config names ``keys``, and an ``evilmod.py`` (and
    a ``pydantic.py`` and an ``eventlog.py``, names airsspec imports) that leave a canary file
    beside it when imported."""
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as f:
        f.write(f'\n[privacy]\nencrypt = "session"\nkeys = "{keys}"\n')
    for module in ("evilmod", "pydantic", "eventlog"):
        (root / f"{module}.py").write_text(EVIL.format(canary=str(root.parent / "CANARY")))
    return root


class DictKms:
    """A KMS in one callable (``eventlog.keystores.KeyCallback``)."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes] = {}

    def __call__(self, action: str, kid: str) -> bytes | bool | None:
        if action == "destroy":
            return self.keys.pop(kid, None) is not None
        if action == "create":
            self.keys.setdefault(kid, os.urandom(32))
        return self.keys.get(kid)


VAULT = DictKms()


def vault_factory() -> DictKms:
    """What the fake distribution's entry point names."""
    return VAULT


class _FakeDistribution:
    def __init__(self, *points: EntryPoint) -> None:
        from importlib.metadata import EntryPoints

        self.entry_points = EntryPoints(points)


def _installed(monkeypatch: pytest.MonkeyPatch, **names: str) -> list[list[str]]:
    """Pretend an installed distribution declares the key stores ``names`` (name -> value);
    return the paths the lookup was given."""
    points = [EntryPoint(n, v, keystores.ENTRY_POINT_GROUP) for n, v in names.items()]
    asked: list[list[str]] = []

    def distributions(path: list[str]) -> list[_FakeDistribution]:
        asked.append(path)
        return [_FakeDistribution(*points)]

    monkeypatch.setattr(importlib.metadata, "distributions", distributions)  # looked up per call
    return asked


@pytest.mark.parametrize("keys", ["evilmod:keys", "os:getcwd", "json:dumps", "evilmod"])
def test_a_config_naming_code_is_refused_and_nothing_is_imported(
    tmp_path: Path, keys: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path / "repo", "local")
    config = repo / "airsspec.toml"
    config.write_text(config.read_text().replace('keys = "local"', f'keys = "{keys}"'))
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))  # as python -m or -c would have it
    monkeypatch.delitem(sys.modules, "evilmod", raising=False)
    with pytest.raises(SettingsError, match=r"airsspec.toml: \[privacy\] keys: ") as refused:
        load_settings(config, env={})
    assert "\n" not in str(refused.value)
    assert "evilmod" not in sys.modules
    assert not (tmp_path / "CANARY").exists()


def test_an_installed_key_store_is_opened_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed(monkeypatch, vault=f"{__name__}:vault_factory")
    init_workspace(tmp_path)
    with (tmp_path / "airsspec.toml").open("a") as f:
        f.write('\n[privacy]\nencrypt = "session"\nkeys = "vault"\n')
    VAULT.keys.clear()
    with Memory.open(tmp_path) as memory:
        memory.append("s1", {"type": "user", "content": "sealed by the installed kms"})
        assert [r.content for r in memory.replay("s1") if r.type == "user"] == [
            "sealed by the installed kms"
        ]
    assert set(VAULT.keys) == {key_id("session:s1")}
    assert not (tmp_path / ".airsspec" / "state" / "keys").exists()
    assert keystores.key_store_names() == ["local", "bucket", "vault"]


def test_an_installed_key_store_that_fails_is_a_key_store_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _installed(monkeypatch, broken="json:dumps", gone="no_such_module_here:factory")
    for name, said in (("broken", "json:dumps"), ("gone", "no_such_module_here")):
        with pytest.raises(KeyStoreError, match=said):
            keystores.open_key_store(name, tmp_path, None)
    with pytest.raises(KeyStoreError, match="no key store of that name; known: local, bucket"):
        keystores.open_key_store("vault", tmp_path, None)


def test_distributions_are_looked_up_without_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository can hold a ``*.dist-info`` folder declaring a key store: on ``sys.path``
    (``python -m`` puts the working directory there) it would be found like an installed one."""
    info = tmp_path / "evil-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{keystores.ENTRY_POINT_GROUP}]\nevil = evilmod:keys\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    assert "evil" not in keystores.key_store_names()
    with pytest.raises(SettingsError, match="no key store named 'evil'"):
        load_settings(None, env={"AIRSSPEC_PRIVACY_KEYS": "evil"})


def test_the_hooks_run_python_so_that_the_project_folder_is_never_on_its_path() -> None:
    for scope in ("local", "user"):
        command = hooks.command("SessionStart", scope)
        assert command.startswith(f"{sys.executable} -P -m airsspec hook SessionStart")
    assert hooks.command("SessionStart", "project").startswith("airsspec hook SessionStart")


@pytest.mark.slow
def test_a_cloned_repository_runs_no_code_through_the_hook_or_the_cli(tmp_path: Path) -> None:
    """The repository's config names its ``evilmod``; it also holds a ``pydantic.py`` that
    every command imports by name. The installed SessionStart hook (run as Claude Code runs it,
    in the repository) leaves the untrusted config alone; ``airsspec trust`` and ``airsspec
    status`` refuse it with one line naming the key; neither file is imported."""
    repo = _repo(tmp_path / "repo", "evilmod:keys")
    env = {**os.environ, **ENV, "PYTHONPATH": str(REPO)}
    payload = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(repo)}
    hook = subprocess.run(
        hooks.command("SessionStart", "user"),
        shell=True,
        cwd=repo,
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    trusted = run_cli("trust", cwd=repo, env=ENV)
    status = run_cli("status", cwd=repo, env=ENV)
    said = "airsspec.toml: [privacy] keys: "
    for done, code, why in ((hook, 1, "is not trusted"), (trusted, 2, said), (status, 2, said)):
        err = done.stderr.decode()
        assert done.returncode == code, err
        assert err.startswith("airsspec: error: ") and err.count("\n") == 1, err
        assert why in err, err
    assert not (tmp_path / "CANARY").exists()


@pytest.mark.slow
def test_the_cli_imports_nothing_from_its_working_directory(tmp_path: Path) -> None:
    """``python -m airsspec`` puts the folder it runs in first on ``sys.path``; its
    ``eventlog.py`` (imported with the package) and ``pydantic.py`` are not what the command
    imports."""
    repo = _repo(tmp_path / "repo", "local")
    done = run_cli("status", cwd=repo, env=ENV)
    assert done.returncode == 0, done.stderr.decode()
    assert not (tmp_path / "CANARY").exists()

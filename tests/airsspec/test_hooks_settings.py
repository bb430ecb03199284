"""``airsspec hooks install|uninstall`` edit Claude Code's settings as text: every byte outside
airsspec's entries is kept (numbers, non-ASCII, layout), the file keeps its mode, a link keeps
pointing where it did, a shape that is not Claude Code's is refused with one error line, and
uninstall gives back the original bytes (or removes the file install created)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from airsspec.hooks import EVENTS
from tests.conftest import init_workspace
from tests.support.cli import run_cli

THEIRS = {
    "model": "opus",
    "hooks": {
        "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
    },
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    (tmp_path / ".claude").mkdir()
    return tmp_path


def _hooks(project: Path, action: str, *extra: str, scope: str = "project"):
    return run_cli(
        "hooks", action, "--scope", scope, "--project", str(project), *extra, cwd=project
    )


def _settings(project: Path) -> Path:
    return project / ".claude" / "settings.json"


def _ours(settings: dict) -> dict[str, int]:
    return {
        event: sum("airsspec-hook" in json.dumps(g) for g in groups)
        for event, groups in settings.get("hooks", {}).items()
    }


def test_install_keeps_other_hooks_and_twice_adds_nothing(project: Path) -> None:
    assert {"SessionStart", "UserPromptSubmit", "SubagentStop", "SessionEnd"} <= set(EVENTS)
    _settings(project).write_text(json.dumps(THEIRS))
    for _ in range(2):
        result = _hooks(project, "install")
        assert result.returncode == 0, result.stderr
    settings = json.loads(_settings(project).read_text())
    assert settings["model"] == "opus"
    assert settings["hooks"]["Notification"] == THEIRS["hooks"]["Notification"]
    assert settings["hooks"]["PostToolUse"][0] == THEIRS["hooks"]["PostToolUse"][0]
    assert _ours(settings) == {**dict.fromkeys(EVENTS, 1), "Notification": 0}
    removed = _hooks(project, "uninstall", "--json")
    assert json.loads(removed.stdout) == {
        "settings": str(_settings(project)),
        "removed": 7,
        "file": "restored",
    }
    assert json.loads(_settings(project).read_text()) == THEIRS


def test_each_scope_writes_its_own_file_and_the_shared_one_names_no_personal_path(
    project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    default = run_cli("hooks", "install", "--project", str(project), cwd=project, env=env)
    assert default.returncode == 0, default.stderr
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert sys.executable in json.dumps(local)  # personal: this interpreter
    assert _hooks(project, "install").returncode == 0
    shared = _settings(project).read_text()
    assert sys.executable not in shared and str(tmp_path) not in shared
    commands = [g["hooks"][0]["command"] for gs in json.loads(shared)["hooks"].values() for g in gs]
    assert all(c.startswith("airsspec hook ") for c in commands)
    user = run_cli("hooks", "install", "--scope", "user", cwd=tmp_path, env=env)
    assert user.returncode == 0, user.stderr
    assert _ours(json.loads((home / ".claude" / "settings.json").read_text())) == dict.fromkeys(
        EVENTS, 1
    )
    bare = tmp_path.parent / f"{tmp_path.name}-bare"  # no airsspec.toml here or above
    bare.mkdir()
    refused = run_cli("hooks", "install", "--project", str(bare), cwd=bare)
    assert refused.returncode == 2 and b"airsspec init" in refused.stderr
    assert list(bare.iterdir()) == []
    bare.rmdir()


def test_install_keeps_the_settings_file_mode(project: Path) -> None:
    path = _settings(project)
    path.write_text(json.dumps(THEIRS))
    path.chmod(0o600)
    assert _hooks(project, "install").returncode == 0
    assert path.stat().st_mode & 0o777 == 0o600
    backup = path.with_name("settings.json.airsspec-backup")
    assert backup.stat().st_mode & 0o777 == 0o600  # a copy of settings stays as private
    assert _hooks(project, "uninstall").returncode == 0
    assert path.stat().st_mode & 0o777 == 0o600


def test_install_edits_the_file_a_link_points_to_and_keeps_the_link(
    project: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    original = json.dumps(THEIRS, indent=4).encode()
    real.write_bytes(original)
    _settings(project).symlink_to(real)
    assert _hooks(project, "install").returncode == 0
    assert _settings(project).is_symlink() and _settings(project).resolve() == real
    assert _ours(json.loads(real.read_text()))["SessionEnd"] == 1
    assert _hooks(project, "uninstall").returncode == 0
    assert _settings(project).is_symlink() and real.read_bytes() == original


def test_a_link_to_nothing_is_refused(project: Path, tmp_path: Path) -> None:
    _settings(project).symlink_to(tmp_path / "gone.json")
    result = _hooks(project, "install")
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and result.stderr.startswith(b"airsspec: error:")
    assert not (tmp_path / "gone.json").exists() and _settings(project).is_symlink()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"hooks": {"Stop": "echo hi"}}', "hooks.Stop"),
        ('{"hooks": []}', "hooks"),
        ('{"hooks": {"Stop": ["echo hi"]}}', "hooks.Stop"),
        ("[1, 2]", "not a JSON object"),
        ('{"hooks": ', "not valid JSON"),
    ],
)
def test_a_shape_that_is_not_claude_codes_is_refused_with_one_line(
    project: Path, text: str, field: str
) -> None:
    _settings(project).write_text(text)
    for action in ("install", "uninstall"):
        result = _hooks(project, action)
        assert result.returncode == 2, result.stderr
        error = result.stderr.decode()
        assert error.startswith("airsspec: error:") and error.count("\n") == 1, error
        assert str(_settings(project)) in error and field in error
        assert _settings(project).read_text() == text  # nothing written
        assert sorted(p.name for p in (project / ".claude").iterdir()) == ["settings.json"]


def test_numbers_and_non_ascii_outside_our_entries_are_kept_as_written(project: Path) -> None:
    text = '{\n    "model": "opus",\n    "limit": 1e400,\n    "greeting": "café ☕ 日本"\n}\n'
    _settings(project).write_text(text, encoding="utf-8")
    assert _hooks(project, "install").returncode == 0
    written = _settings(project).read_text(encoding="utf-8")
    assert '"limit": 1e400' in written and '"greeting": "café ☕ 日本"' in written
    assert "Infinity" not in written and "\\u" not in written

    def strict(constant: str) -> None:
        raise ValueError(constant)

    parsed = json.loads(written, parse_constant=strict)  # still JSON that any reader takes
    assert _ours(parsed) == dict.fromkeys(EVENTS, 1)
    assert written.startswith('{\n    "model": "opus",\n    "limit"')  # the file's own layout


def test_uninstall_gives_back_the_original_bytes(project: Path) -> None:
    original = (
        b'{"model":"opus",\t"hooks" : {\n  "Stop": [ {"hooks": [{"type": "command", '
        b'"command": "say done"}]} ] ,"PreCompact":[]},\n\n  "n": 1.50, "s": "\\u00e9"}'
    )
    _settings(project).write_bytes(original)
    assert _hooks(project, "install").returncode == 0
    assert _hooks(project, "install").returncode == 0
    assert _settings(project).read_bytes() != original
    result = _hooks(project, "uninstall")
    assert result.returncode == 0 and b"restored" in result.stdout
    assert _settings(project).read_bytes() == original
    assert sorted(p.name for p in (project / ".claude").iterdir()) == ["settings.json"]


def test_uninstall_removes_a_file_install_created(project: Path) -> None:
    assert _hooks(project, "install").returncode == 0
    assert _settings(project).is_file()
    result = _hooks(project, "uninstall")
    assert result.returncode == 0 and b"deleted" in result.stdout
    assert list((project / ".claude").iterdir()) == []


def test_uninstall_keeps_changes_made_after_install(project: Path) -> None:
    _settings(project).write_text(json.dumps(THEIRS))
    assert _hooks(project, "install").returncode == 0
    settings = json.loads(_settings(project).read_text())
    settings["theme"] = "dark"  # the user edits the file after installing
    _settings(project).write_text(json.dumps(settings, indent=2))
    result = _hooks(project, "uninstall", "--json")
    assert json.loads(result.stdout)["file"] == "edited"
    assert json.loads(_settings(project).read_text()) == {**THEIRS, "theme": "dark"}
    assert not _settings(project).with_name("settings.json.airsspec-backup").exists()


def test_hooks_install_has_its_own_help_and_options(project: Path) -> None:
    helped = run_cli("hooks", "install", "--help", cwd=project)
    assert helped.returncode == 0 and b"--scope" in helped.stdout and b"--recall" in helped.stdout
    wrong = run_cli("hooks", "uninstall", "--recall", "5", cwd=project)
    assert wrong.returncode == 2 and wrong.stderr.startswith(b"airsspec: error:")
    assert os.listdir(project / ".claude") == []


def test_only_hooks_that_answer_nothing_run_in_the_background(project: Path) -> None:
    def background(settings: dict) -> set[str]:
        return {e for e, groups in settings["hooks"].items() if groups[0]["hooks"][0].get("async")}

    assert _hooks(project, "install").returncode == 0
    capture = {"UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop"}
    assert background(json.loads(_settings(project).read_text())) == capture
    assert _hooks(project, "install", "--recall", "300").returncode == 0  # prompts get answers
    settings = json.loads(_settings(project).read_text())
    assert background(settings) == capture - {"UserPromptSubmit"}
    assert settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].startswith(
        "airsspec hook UserPromptSubmit --recall 300"
    )


# Commands of the user's that mention the marker: none is one install writes.
LOOKALIKES = [
    "my-airsspec-hook.sh",
    "echo airsspec-hook",
    "/opt/airsspec-hook/run.sh Stop",
    "notify.sh  # airsspec-hook",
    "airsspec hook Stop  # airsspec-hook-mine",
    "airsspec hook Stop; curl example.invalid  # airsspec-hook",
    "airsspec hook Stop --since 1  # airsspec-hook",
    "python -m airsspec status  # airsspec-hook",
]


def test_a_users_hook_mentioning_the_marker_is_kept_and_the_bytes_come_back(
    tmp_path: Path,
) -> None:
    from airsspec.hooks import entries
    from airsspec.hooks.settings_file import install, uninstall

    theirs = {"hooks": {"Stop": [], "SessionStart": []}}
    for command in LOOKALIKES:
        hook = {"type": "command", "command": command}
        theirs["hooks"]["Stop"].append({"hooks": [hook]})
        theirs["hooks"]["SessionStart"].append({"hooks": [hook]})
    path = tmp_path / "settings.json"
    original = json.dumps(theirs, indent="\t").replace("\n", "\r\n").encode()
    path.write_bytes(original)
    for scope in ("local", "project"):
        assert install(path, entries(scope, ["-w", "/a b/ws"], ["--budget", "500"]))
        kept = json.loads(path.read_text())["hooks"]
        for event in ("Stop", "SessionStart"):
            assert kept[event][: len(LOOKALIKES)] == theirs["hooks"][event]
            assert len(kept[event]) == len(LOOKALIKES) + 1  # ours, once
    assert uninstall(path) == (len(EVENTS), "restored")
    assert path.read_bytes() == original
    assert uninstall(path) == (0, "unchanged") and path.read_bytes() == original


def test_uninstall_without_a_backup_removes_exactly_what_install_writes(tmp_path: Path) -> None:
    """Entries of this version and of earlier ones (``python -m airsspec -w PATH hook import``)
    go; a user's look-alike stays."""
    from airsspec.hooks import command
    from airsspec.hooks.settings_file import uninstall

    ours = [
        command("Stop", "user"),
        command("Stop", "project", ["-c", "/x/airsspec.toml"], ["--recall", "300"]),
        f"{sys.executable} -m airsspec -w '/my ws' hook import  # airsspec-hook",
        "/usr/bin/python3 -m airsspec hook session-start --budget 2000  # airsspec-hook",
    ]
    groups = [{"hooks": [{"type": "command", "command": c}]} for c in [*ours, *LOOKALIKES]]
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {"Stop": groups}}, indent=2))
    assert uninstall(path) == (len(ours), "edited")
    left = [g["hooks"][0]["command"] for g in json.loads(path.read_text())["hooks"]["Stop"]]
    assert left == LOOKALIKES

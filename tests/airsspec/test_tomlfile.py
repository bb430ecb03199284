"""``read_toml``: an ``airsspec.toml`` parsed once for each change of the file, and what
``tomllib`` gives whatever was kept: an edit, a file changed within the settle time, values JSON
cannot hold, a damaged cache, a folder that cannot be written."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

import airsspec.tomlfile as tomlfile
from airsspec.tomlfile import read_toml
from tests.support.cli import run_cli

TEXT = '[workspace]\npath = ".airsspec"\n\n[memory]\nhot_window_size = 40\nratio = 0.5\n'


@pytest.fixture
def parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts ``tomllib`` parses from now on, with the cache in a folder of this test's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen: list[str] = []
    real = tomllib.loads

    def loads(text: str) -> dict:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(tomllib, "loads", loads)
    return seen


def _settled(path: Path) -> None:
    """Put the file's mtime two seconds back (its ctime stays: kept only once both settle)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 2_000_000_000))


@pytest.fixture
def config(tmp_path: Path, parses: list[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``airsspec.toml`` holding ``TEXT``, every file looking settled (a second old)."""
    monkeypatch.setattr(tomlfile, "SETTLE_NS", -(10**18))
    path = tmp_path / "airsspec.toml"
    path.write_text(TEXT)
    return path


def test_a_file_is_parsed_once_while_it_is_unchanged(
    tmp_path: Path, parses: list[str], config: Path
) -> None:
    path = config
    assert read_toml(path) == tomllib.loads(TEXT)
    parses.clear()
    assert read_toml(path) == tomllib.loads(TEXT)
    assert read_toml(str(path)) == read_toml(path)
    assert len(parses) == 1  # the one above, not read_toml's
    kept = list((tmp_path / "cache" / "airsspec" / "toml").iterdir())
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o777 == 0o600


def test_an_edit_is_parsed_again(config: Path) -> None:
    path = config
    read_toml(path)
    edited = TEXT.replace("40", "41")  # the same size
    st = path.stat()
    path.write_text(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the mtime put back
    assert read_toml(path)["memory"]["hot_window_size"] == 41


def test_a_file_changed_within_the_settle_time_is_not_kept(
    tmp_path: Path, parses: list[str]
) -> None:
    path = tmp_path / "airsspec.toml"
    path.write_text(TEXT)
    _settled(path)  # its ctime is now: it may change again in the same tick
    read_toml(path)
    read_toml(path)
    assert len(parses) == 2
    assert not (tmp_path / "cache" / "airsspec" / "toml").exists()


def test_values_json_cannot_hold_are_parsed_each_time(parses: list[str], config: Path) -> None:
    path = config
    path.write_text("when = 2026-11-29T01:00:00Z\nbig = inf\n")
    first = read_toml(path)
    assert read_toml(path) == first == tomllib.loads(path.read_text())
    assert len(parses) == 3  # twice by read_toml, once above


def test_a_damaged_cache_is_ignored_and_a_bad_file_raises(tmp_path: Path, config: Path) -> None:
    path = config
    read_toml(path)
    (kept,) = (tmp_path / "cache" / "airsspec" / "toml").iterdir()
    kept.write_text('{"key": "nonsense", "data": []')
    assert read_toml(path) == tomllib.loads(TEXT)
    path.write_bytes(b"[workspace\n")
    with pytest.raises(tomllib.TOMLDecodeError):
        read_toml(path)
    path.write_bytes(b'x = "\xff"\n')
    with pytest.raises(UnicodeDecodeError):
        read_toml(path)


def test_an_unwritable_cache_folder_still_reads(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a folder")
    path = config
    assert read_toml(path) == read_toml(path) == tomllib.loads(TEXT)


def test_a_config_that_is_not_utf8_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "airsspec.toml").write_bytes(b'[workspace]\npath = "\xff"\n')
    done = run_cli("sessions", cwd=tmp_path, env={"AIRSSPEC_NO_SERVER": "1"})
    assert done.returncode != 0
    (line,) = done.stderr.decode().strip().splitlines()
    assert line.startswith("airsspec: error: ") and "airsspec.toml" in line and "utf-8" in line


def test_the_cache_keeps_the_files_written_last(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workspaces made and deleted (a test suite, a script) leave at most ``KEPT_AT_MOST``."""
    monkeypatch.setattr(tomlfile, "KEPT_AT_MOST", 3)
    paths = []
    for n in range(5):
        path = tmp_path / f"w{n}" / "airsspec.toml"
        path.parent.mkdir()
        path.write_text(TEXT)
        paths.append(path)
        read_toml(path)
    kept = list((tmp_path / "cache" / "airsspec" / "toml").glob("*.json"))
    assert len(kept) == 3
    inodes = {int(p.stem.split("-")[1]) for p in kept}
    assert inodes == {p.stat().st_ino for p in paths[2:]}


def test_a_relative_cache_home_is_ignored(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``XDG_CACHE_HOME`` must be absolute (the XDG spec): a relative one would put the cache
    in whatever folder a command runs in (a project's checkout); the default is used."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative-cache")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert read_toml(config) == tomllib.loads(TEXT)
    assert not (tmp_path / "relative-cache").exists()
    assert len(list((tmp_path / "home" / ".cache" / "airsspec" / "toml").iterdir())) == 1


def test_a_cache_folder_others_can_write_is_not_trusted(
    tmp_path: Path, parses: list[str], config: Path
) -> None:
    """A parsed file planted by another user in a cache folder they can write (a cache home
    shared between users) would give its values for the file: such a folder is neither read
    nor written, every command parses its file."""
    folder = tmp_path / "cache" / "airsspec" / "toml"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    st = config.stat()
    key = [str(config), st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    planted = {"workspace": {"path": "/somewhere/else"}}
    (folder / f"{st.st_dev}-{st.st_ino}.json").write_text(json.dumps({"key": key, "data": planted}))
    assert read_toml(config) == read_toml(config) == tomllib.loads(TEXT)
    assert len(parses) == 3  # twice by read_toml, once above
    assert [p.name for p in folder.iterdir()] == [f"{st.st_dev}-{st.st_ino}.json"]

"""Which projects' ``airsspec.toml`` this user lets the Claude Code hooks act on.

A hook runs in whatever project Claude Code opens, a repository just cloned among them, and
that project's ``airsspec.toml`` says where the conversation goes: ``[workspace] path`` (any
folder, inside the repository where git may commit it, or outside it), ``[storage]`` (a bucket
and its endpoint, reached with this user's credentials) and ``[privacy] keys``. So a hook acts
only on a config this user trusted: one ``airsspec init`` wrote here, one ``airsspec trust``
(or ``airsspec hooks install`` in the project) was run for, or the one fixed by ``hooks install
-w/-c``. Trust holds for the config's routing as it was when given (the workspace folder it
resolves to, its ``[storage]`` table, its ``[privacy]`` table (encryption, key store) and its
``[secrets]`` table (what is redacted before it is written, which decides what a log committed
with the repository would hold): a change of any of them, by an edit or a ``git pull``, asks for
``airsspec trust`` again; any other edit keeps it.

The trusted configs are kept in ``$XDG_CONFIG_HOME/airsspec/trusted.json`` (an absolute
``XDG_CONFIG_HOME``, else ``~/.config``), in a folder of this user's that nobody else may write:
a file someone else could write trusts nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from airsspec.errors import SettingsError
from airsspec.tomlfile import read_toml

FILE_NAME = "trusted.json"


@dataclass(frozen=True)
class Routing:
    """Where a config sends what is captured, and in what form: what trust is given for."""

    config: str  # the config file, in its folder resolved (``located``)
    workspace: str  # the workspace folder it names, resolved
    storage: dict[str, Any]  # its [storage] table as written ({}: the workspace's folder)
    privacy: dict[str, Any]  # its [privacy] table: encryption and where the keys live
    secrets: dict[str, Any]  # its [secrets] table: what is redacted before it is written

    def fingerprint(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def folder() -> Path:
    """This user's airsspec config folder (``$XDG_CONFIG_HOME/airsspec``)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "airsspec"


def located(config: str | Path) -> Path:
    """``config`` in its folder resolved, the file itself not: its workspace is named relative
    to where it is found (``Workspace.open``), so a link to a config trusted elsewhere is a
    config of its own, with a workspace of its own."""
    path = Path(config)
    return path.parent.resolve() / path.name


def routing(config: str | Path) -> Routing:
    """Where ``config`` sends what is captured (``SettingsError`` when it cannot be read)."""
    path = located(config)
    try:
        data = read_toml(path)
    except (OSError, ValueError) as exc:
        raise SettingsError(f"{path}: cannot be read as TOML: {exc}") from exc
    workspace = data.get("workspace") if isinstance(data.get("workspace"), dict) else {}
    where = workspace.get("path", ".airsspec") if isinstance(workspace, dict) else ".airsspec"
    tables = {name: data.get(name) for name in ("storage", "privacy", "secrets")}
    storage, privacy, secrets = (dict(t) if isinstance(t, dict) else {} for t in tables.values())
    try:
        root = (path.parent / str(where)).resolve() if "\0" not in str(where) else path.parent
    except (OSError, RuntimeError) as exc:  # a link loop (RuntimeError before Python 3.13)
        raise SettingsError(f"{path}: [workspace] path {where!r} cannot be resolved") from exc
    return Routing(str(path), str(root), storage, privacy, secrets)


def trusted(config: str | Path) -> bool:
    """Whether this user trusted ``config`` with the routing it has now."""
    try:
        now = routing(config)
    except SettingsError:
        return False
    entry = _read().get(now.config)
    return isinstance(entry, dict) and entry.get("fingerprint") == now.fingerprint()


def trust(config: str | Path) -> Routing:
    """Trust ``config`` with its routing as it is now; what was trusted. ``SettingsError``
    when the trusted file's folder is not this user's alone (nothing is written)."""
    given = routing(config)
    with _locked() as entries:
        shown = asdict(given)  # what was trusted, for a reader; no copy of a secret key
        shown["storage"] = {k: v for k, v in given.storage.items() if k != "secret_access_key"}
        entries[given.config] = {"fingerprint": given.fingerprint(), **shown}
    return given


def revoke(config: str | Path) -> bool:
    """Trust ``config`` no more; whether it was trusted."""
    key = str(located(config))
    with _locked() as entries:
        return entries.pop(key, None) is not None


def _private(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode)


def _read() -> dict[str, Any]:
    path = folder() / FILE_NAME
    if not (_private(path.parent) and _private(path)):
        return {}  # absent, or another user could have written it: it trusts nothing
    with contextlib.suppress(OSError, ValueError, RecursionError):  # nested too deep
        data = json.loads(path.read_bytes())
        if isinstance(data, dict) and isinstance(data.get("trusted"), dict):
            return data["trusted"]
    return {}


@contextlib.contextmanager
def _locked() -> Iterator[dict[str, Any]]:
    """The trusted configs, to change in the block; written back atomically at its end (one
    writer at a time: a lock file beside it)."""
    place = folder()
    place.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not _private(place):
        raise SettingsError(f"{place} may be written by another user: no config is trusted there")
    fd = os.open(place / f"{FILE_NAME}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entries = _read()
        yield entries
        partial = place / f"{FILE_NAME}.{os.getpid()}.part"
        out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with open(out, "w", encoding="utf-8") as file:
            kept = {"version": 1, "trusted": entries}
            json.dump(kept, file, indent=1, sort_keys=True, default=str)
        os.replace(partial, place / FILE_NAME)
    finally:
        os.close(fd)

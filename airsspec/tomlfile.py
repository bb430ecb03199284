"""``read_toml``: an ``airsspec.toml`` parsed once for each change of the file.

Every command reads its ``airsspec.toml`` (the light client too, to find a running server), and
importing and running Python's TOML parser took about 7 ms of each one: a fifth of a short
command's own work. So what ``tomllib`` made of a file is kept as JSON in this user's cache
folder (``$XDG_CACHE_HOME/airsspec/toml``, default ``~/.cache/airsspec/toml``), under the
file's device and inode, with its path, size, mtime and ctime: a command whose file has all of
them unchanged reads that JSON instead (a write changes the mtime or ctime). Kept only when
the file is a second old, so an edit in the same clock tick as the read is never taken for no
change; only values JSON gives back equal (no dates); in a folder of this user's alone, the
last ``KEPT_AT_MOST`` files written.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

SETTLE_NS = 1_000_000_000
KEPT_AT_MOST = 64  # files parsed: a user's few configs, and the workspaces made and deleted


def cache_folder() -> Path:
    """Where parsed files are kept for this user: ``$XDG_CACHE_HOME`` when absolute (the XDG
    spec: a relative one would put the cache in the folder a command runs in), else
    ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airsspec" / "toml"


def _private(folder: Path) -> bool:
    """Whether ``folder`` is a folder of this user's that no one else may write: a parsed file
    another user planted there would be taken for what the file says."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML document at ``path``, as ``tomllib.loads`` gives it. Raises ``OSError`` when it
    cannot be read, ``ValueError`` when it is not UTF-8 TOML (``tomllib.TOMLDecodeError`` is
    one)."""
    with open(path, "rb") as file:
        st = os.fstat(file.fileno())
        key = [os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        kept = cache_folder() / f"{st.st_dev}-{st.st_ino}.json"
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            cached = json.loads(kept.read_bytes()) if _private(kept.parent) else {}
            if cached["key"] == key and isinstance(cached["data"], dict):
                return cached["data"]
        text = file.read().decode("utf-8")
    import tomllib

    try:
        data = tomllib.loads(text)
    except RecursionError as exc:  # nested deeper than the parser recurses: not TOML to us
        raise ValueError("nested too deep to be read") from exc
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > SETTLE_NS:
        _keep(kept, key, data)
    return data


def _keep(kept: Path, key: list[Any], data: dict[str, Any]) -> None:
    """Write ``data`` for ``key`` (atomically, this user's only); nothing when JSON would not
    give the same values back, or the folder cannot be written."""
    try:
        payload = json.dumps({"key": key, "data": data}, allow_nan=False)
    except (TypeError, ValueError):  # a date, a time, an infinity: parsed each time
        return
    if json.loads(payload)["data"] != data:
        return
    with contextlib.suppress(OSError):
        kept.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private(kept.parent):
            return
        partial = kept.with_name(f"{kept.name}.{os.getpid()}.part")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with open(fd, "w", encoding="utf-8") as out:
            out.write(payload)
        os.replace(partial, kept)
        files = sorted(kept.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for stale in files[:-KEPT_AT_MOST]:  # the oldest written first
            stale.unlink(missing_ok=True)

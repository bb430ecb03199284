"""Atomic file output for projections: write a temporary file, then rename it over the target.

A reader (or a restart after SIGKILL) sees either the old file or the new one, never a mix.
Projection files are not fsynced: they are derived, and a file damaged by a power loss fails
to load and is rebuilt from the log.
"""

from __future__ import annotations

import os
from pathlib import Path

_TMP_MARK = ".tmp-"


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (a link planted at ``path`` is replaced, never followed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_TMP_MARK}{os.getpid()}-{path.name}")
    tmp.unlink(missing_ok=True)  # a stale temporary, or something planted in its place
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def remove_stale_temporaries(folder: Path) -> int:
    """Delete temporaries a killed writer left behind; return how many."""
    if not folder.is_dir():
        return 0
    stale = list(folder.glob(f"{_TMP_MARK}*"))
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return len(stale)


def folder_size(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0

"""Where a session's log lives, and which session ids are allowed.

``{log_dir}/{session}.jsonl`` is the frozen log of one session; ``{session}.jsonl.quarantine``
next to it receives the bytes of torn tails. A session id must be a portable file name that cannot
escape ``log_dir``: 1-128 characters of ``A-Z a-z 0-9 . _ -``, starting with a letter or digit,
not ending with a dot, and not a name Windows reserves (``CON``, ``NUL``, ``COM1``...).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from eventlog.errors import InvalidSessionIdError

LOG_SUFFIX = ".jsonl"
QUARANTINE_SUFFIX = ".jsonl.quarantine"

_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{i}" for p in ("com", "lpt") for i in range(1, 10)}


def validate_session_id(session: object) -> str:
    """Return ``session`` if it is a safe session id, else raise ``InvalidSessionIdError``."""
    if not isinstance(session, str) or not _SESSION_RE.match(session):
        raise InvalidSessionIdError(
            f"invalid session id {session!r}: use 1-128 characters of letters, digits, '.', '_'"
            " or '-', starting with a letter or digit"
        )
    if session.endswith(".") or session.split(".")[0].lower() in _RESERVED:
        raise InvalidSessionIdError(f"invalid session id {session!r}: not a portable file name")
    return session


def session_path(log_dir: Path, session: str) -> Path:
    return log_dir / f"{validate_session_id(session)}{LOG_SUFFIX}"


def quarantine_path(log_dir: Path, session: str) -> Path:
    return log_dir / f"{validate_session_id(session)}{QUARANTINE_SUFFIX}"


def list_sessions(log_dir: Path) -> list[str]:
    """Sessions with a log file, sorted by id."""
    try:
        entries = list(os.scandir(log_dir))
    except FileNotFoundError:
        return []
    names = []
    for entry in entries:
        if entry.name.endswith(LOG_SUFFIX) and entry.is_file():
            name = entry.name[: -len(LOG_SUFFIX)]
            if _SESSION_RE.match(name):
                names.append(name)
    return sorted(names)

"""Bearer tokens of ``airsspec serve``: who may call the server, and as which user.

A token is shown once, when it is made (``airsspec token create``); the workspace keeps only its
SHA-256 (``auth/tokens.json``, mode 0600, written whole then renamed), with its id, user, whether
it is read-only and when it was made. A token is checked by hashing what a client sends and looking
the hash up; comparison is in constant time. Revoking removes the entry: the next request with that
token is refused. The file is not a projection (it is not derived from the log), so it lives beside
the log's folders, not under ``state/``, which may be deleted at any time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airsspec.errors import TokenError

PREFIX = "airs_"
_USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


SCOPE_HEADERS = {
    "user": "x-airsspec-user",
    "agent": "x-airsspec-agent",
    "project": "x-airsspec-project",
}
"""Headers that narrow a request's scope (the light client sends AIRSSPEC_USER/AGENT/PROJECT)."""


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a user, whether it may write, and the scope its reads and
    writes are limited to (``scope``: field -> value; empty only for the workspace's owner)."""

    user: str
    read_only: bool = False
    token_id: str | None = None
    owner: bool = False  # the user who started the server: every session, unless narrowed
    scope: tuple[tuple[str, str], ...] = ()

    def narrowed(self, headers: Any) -> Principal:
        """This principal with the scope a request asks for: a token's user always; the
        owner's only what the headers name; an agent or a project narrows either."""
        fields = {} if self.owner else {"user": self.user}
        for name, header in SCOPE_HEADERS.items():
            value = headers.get(header)
            if value and (name != "user" or self.owner):
                fields[name] = value
        return replace(self, scope=tuple(sorted(fields.items())))


@dataclass(frozen=True)
class TokenEntry:
    """One stored token: never the token itself, only its hash."""

    id: str
    user: str
    read_only: bool
    sha256: str
    created: str

    def principal(self) -> Principal:
        """The principal a request with this token acts for."""
        return Principal(self.user, self.read_only, self.id)


def digest(token: str) -> str:
    """The SHA-256 of a token, as stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def check_user(user: str) -> str:
    """``user`` if it is a usable user name; else ``TokenError``."""
    if not isinstance(user, str) or not _USER_RE.match(user):
        raise TokenError(
            f"invalid user {user!r}: use 1-128 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit"
        )
    return user


class TokenStore:
    """The tokens of one workspace (``<workspace>/auth/tokens.json``)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / "auth" / "tokens.json"

    def entries(self) -> list[TokenEntry]:
        """Every stored token (hashes only), oldest first."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return [TokenEntry(**item) for item in data["tokens"]]
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError) as exc:
            raise TokenError(f"{self.path}: damaged token file ({exc}); fix or remove it") from exc

    def _write(self, entries: list[TokenEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"tokens": [asdict(e) for e in entries]}, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        partial.replace(self.path)

    def create(self, user: str, *, read_only: bool = False) -> tuple[TokenEntry, str]:
        """Make a token for ``user``; return its entry and the token (shown only now)."""
        check_user(user)
        token_id = secrets.token_hex(4)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        entry = TokenEntry(token_id, user, read_only, digest(token), created)
        self._write([*self.entries(), entry])
        return entry, token

    def revoke(self, token_id: str) -> TokenEntry:
        """Remove the token with this id (or a unique prefix of it); return what was removed."""
        entries = self.entries()
        found = [e for e in entries if e.id.startswith(token_id)] if token_id else []
        if len(found) != 1:
            known = ", ".join(e.id for e in entries) or "none"
            what = "no" if not found else "more than one"
            raise TokenError(f"{what} token with id {token_id!r} (tokens: {known})")
        self._write([e for e in entries if e is not found[0]])
        return found[0]

    def lookup(self, token: str) -> Principal | None:
        """The principal of ``token``, or None when it is not a stored token."""
        wanted = digest(token)
        match = None
        for entry in self.entries():  # every entry compared: the time says nothing of which
            if hmac.compare_digest(entry.sha256, wanted):
                match = entry
        return match.principal() if match else None

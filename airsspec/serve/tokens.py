"""Bearer tokens of ``airsspec serve``: who may call the server, and as which user.

A token is shown once, when it is made (``airsspec token create``); the workspace keeps only its
SHA-256 (``auth/tokens.json``, mode 0600, written whole then renamed), with its id, user, whether
it is read-only or an admin's, and when it was made. A token is checked by hashing what a client
sends and looking the hash up; comparison is in constant time. Revoking removes the entry (named by
its full id, or a prefix of at least ``MIN_PREFIX`` characters naming one entry): the next request
with that token is refused. The file is not a projection (it is not derived from the log), so it
lives beside the log's folders, not under ``state/``, which may be deleted at any time.

Two kinds of principal: a user's token acts for its user only (no header widens it); an admin's
token (``airsspec token create --user NAME --admin``, and the server's own local token) sees the
whole workspace, narrowed only by what a request's headers name. Every entry's user is a name of
the one rule (``eventlog.names.check_name``), checked when the file is read: an entry breaking it
makes the whole file damaged, never a user of its own. The file and its folder are never reached
through a link (one planted there would send the hashes elsewhere, or read them from elsewhere).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airsspec.errors import InvalidNameError, TokenError, UnsafePathError
from airsspec.memory import check_name

PREFIX = "airs_"
COOKIE = "airsspec_sign_in"  # the viewer's cookie: a sign-in of the server, never a token
MIN_PREFIX = 6  # characters of an id a revoke may name it by: one character names too many


SCOPE_HEADERS = {
    "user": "x-airsspec-user",
    "agent": "x-airsspec-agent",
    "project": "x-airsspec-project",
}
"""Headers that narrow a request's scope (the light client sends AIRSSPEC_USER/AGENT/PROJECT)."""


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a user, whether it may write, whether it is an admin, and the
    scope its reads and writes are limited to (``scope``: field -> value; empty only for an
    admin whose request names no scope). ``local`` marks the server's own token (the one in the
    discovery file): the only principal for which the server reads files of its machine."""

    user: str
    read_only: bool = False
    token_id: str | None = None
    admin: bool = False  # the whole workspace, narrowed only by what a request names
    scope: tuple[tuple[str, str], ...] = ()
    local: bool = False

    def narrowed(self, fields: dict[str, str]) -> Principal:
        """This principal with the scope a request asks for (``fields``: checked names, see
        ``scope_fields``): a user's token keeps its user always; an admin's only what the
        request names; an agent or a project narrows either."""
        scope = {} if self.admin else {"user": self.user}
        for name, value in fields.items():
            if name != "user" or self.admin:
                scope[name] = value
        return replace(self, scope=tuple(sorted(scope.items())))


def scope_fields(headers: Any) -> dict[str, str]:
    """The scope a request's headers name: each value percent-encoded UTF-8 (as the light
    client sends it, so a name outside ASCII arrives exactly), decoded strictly and checked
    with the one name rule; ``InvalidNameError`` (400) names the header otherwise."""
    from urllib.parse import unquote

    fields = {}
    for name, header in SCOPE_HEADERS.items():
        raw = headers.get(header)
        if not raw:
            continue
        try:
            value = unquote(raw, encoding="utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise InvalidNameError(
                f"{header}: not percent-encoded UTF-8 (encode the name with "
                "urllib.parse.quote(value, safe=''))"
            ) from exc
        fields[name] = check_name(value, header)
    return fields


@dataclass(frozen=True)
class TokenEntry:
    """One stored token: never the token itself, only its hash."""

    id: str
    user: str
    read_only: bool
    sha256: str
    created: str
    admin: bool = False  # a file written before admins existed holds none

    def principal(self) -> Principal:
        """The principal a request with this token acts for."""
        return Principal(self.user, self.read_only, self.id, admin=self.admin)


def digest(token: str) -> str:
    """The SHA-256 of a token, as stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def _entry(item: Any) -> TokenEntry:
    """One entry of the file, its fields' types and its user's name checked."""
    entry = TokenEntry(**item)
    for name in ("id", "user", "sha256", "created"):
        if not isinstance(getattr(entry, name), str):
            raise TypeError(f"{name} is not text")
    if not isinstance(entry.read_only, bool) or not isinstance(entry.admin, bool):
        raise TypeError("read_only and admin are true or false")
    check_name(entry.user, "user")
    return entry


class TokenStore:
    """The tokens of one workspace (``<workspace>/auth/tokens.json``)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / "auth" / "tokens.json"

    def _refuse_links(self) -> None:
        """``UnsafePathError`` when the folder or the file is a link (or the file is not a
        regular file)."""
        for path in (self.path.parent, self.path):
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                return
            if stat.S_ISLNK(mode):
                raise UnsafePathError(path)
        if not stat.S_ISREG(mode):
            raise UnsafePathError(self.path, "not a regular file")

    def entries(self) -> list[TokenEntry]:
        """Every stored token (hashes only), oldest first."""
        self._refuse_links()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return []
        try:
            with os.fdopen(fd, encoding="utf-8") as file:
                data = json.load(file)
            return [_entry(item) for item in data["tokens"]]
        except (ValueError, KeyError, TypeError) as exc:  # InvalidNameError is a ValueError
            raise TokenError(f"{self.path}: damaged token file ({exc}); fix or remove it") from exc

    def _write(self, entries: list[TokenEntry]) -> None:
        self._refuse_links()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._refuse_links()  # made by someone else between the look and the mkdir
        partial = self.path.with_name(self.path.name + ".tmp")
        with contextlib.suppress(FileNotFoundError):  # a leftover, or a link planted there
            partial.unlink()
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"tokens": [asdict(e) for e in entries]}, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        partial.replace(self.path)

    def create(
        self, user: str, *, read_only: bool = False, admin: bool = False
    ) -> tuple[TokenEntry, str]:
        """Make a token for ``user`` (an admin's with ``admin``); return its entry and the
        token (shown only now)."""
        check_name(user, "--user")
        token_id = secrets.token_hex(4)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        entry = TokenEntry(token_id, user, read_only, digest(token), created, admin)
        self._write([*self.entries(), entry])
        return entry, token

    def revoke(self, token_id: str, *, keep_an_admin: bool = False) -> TokenEntry:
        """Remove the token with this id (or a prefix of at least ``MIN_PREFIX`` characters
        naming only it); return what was removed. ``keep_an_admin`` (a revoke over the
        network): the last admin token is refused, since no request could make another."""
        entries = self.entries()
        found = [e for e in entries if e.id == token_id]
        if not found and len(token_id) >= MIN_PREFIX:
            found = [e for e in entries if e.id.startswith(token_id)]
        if len(found) != 1:
            known = ", ".join(e.id for e in entries) or "none"
            what = "no" if not found else "more than one"
            short = f" (name a full id, or at least {MIN_PREFIX} of its characters)"
            hint = short if not found and len(token_id) < MIN_PREFIX else ""
            raise TokenError(f"{what} token with id {token_id!r}{hint} (tokens: {known})")
        kept = [e for e in entries if e is not found[0]]
        if keep_an_admin and found[0].admin and not any(e.admin for e in kept):
            raise TokenError(
                f"token {found[0].id} is the last admin token: no request could make another "
                "(revoke it on the host: airsspec token revoke)"
            )
        self._write(kept)
        return found[0]

    def lookup(self, token: str) -> Principal | None:
        """The principal of ``token``, or None when it is not a stored token."""
        wanted = digest(token)
        match = None
        for entry in self.entries():  # every entry compared: the time says nothing of which
            if hmac.compare_digest(entry.sha256, wanted):
                match = entry
        return match.principal() if match else None

"""Crypto-shredding: record content sealed with a key per subject, so destroying it forgets it.

The log is never rewritten, so a user's data cannot be removed from it; it can be made
unreadable. With ``[privacy] encrypt = "user"`` (or ``"session"``), the content fields of each
record (``CONTENT_FIELDS``: what someone said, a tool's parameters and result, summaries, learning
texts, a session's task and end status, a verdict's reason, what a context build was asked, and
every record's ``meta`` and ``origin``: every free-text field) are encrypted at append,
before the record is encoded, with AES-256-GCM under a data key of its *subject*: the user
owning the session when the record is appended (``eventlog.owners``), else
the session itself. The stored record stays a valid record of its type: each sealed field holds
a placeholder (``SEALED``; ``meta`` and ``origin`` are left out) and one ``sealed`` object holds
the key id, nonce and ciphertext. The envelope (``id``,
``session``, ``seq``, ``ts``, ``type``, ``prev``, ``hash``...) and the structural fields stay
clear, and the hash chain covers the ciphertext: ``verify`` needs no key.

Reading (``EventLog.read``) opens a sealed record with its key; when the key is gone the
placeholders read ``FORGOTTEN`` and the record is marked ``forgotten`` (projections skip it).
Keys live in a ``KeyStore``: one 32-byte file per key under ``state/keys/`` (mode 0600), or any
object with the same three calls (a KMS client). Destroying a key is the forgetting.

In ``"user"`` mode a user's session records are sealed under a key derived (HKDF) from two
random keys, the user's and the session's (the ``kid`` names both: ``USERKID.SESSIONKID``):
destroying either shreds them, so one session of a user can be forgotten as well as the whole
user. What a user adds outside a session (a learning) is sealed under the user's key alone.
Records sealed before nesting existed (under the user's key alone) are forgotten only with the
user (``forget --session`` says so and stops).

Invariants: input events can never carry ``sealed`` (they are validated strictly first); the
associated data binds a ciphertext to its session and type, so a sealed body moved elsewhere does
not open; a key id is derived from its subject, so no index of subjects is kept.
"""

from __future__ import annotations

import base64
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, Protocol

import orjson

from eventlog.errors import KeyStoreError
from eventlog.owners import OWNING_TYPES, NoOwners, Owners

KEY_RECHECK_SECONDS = 0.05
"""How long a process uses a key without looking at its file again (a key another process
destroyed is honoured within this time; looking on every record costs a third of the rate)."""

SEALED = "[sealed]"
FORGOTTEN = "[forgotten]"
EncryptMode = Literal["off", "user", "session"]


def _text(_: Any) -> str:
    return SEALED


def _chunks(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**chunk, "summary": SEALED} for chunk in chunks]


def _facts(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**fact, "key": SEALED, "text": SEALED} for fact in facts]


def _empty(_: Any) -> dict[str, Any]:
    return {}


def _list(_: Any) -> list[Any]:
    return []


CONTENT_FIELDS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "user": {"content": _text},
    "assistant": {"content": _text},
    "thought": {"content": _text},
    "action": {"params": _empty},
    "observation": {"result": _text},
    "imported": {"text": _text},
    "compaction": {"summary": _text, "chunks": _chunks},
    "learning": {"text": _text},
    "facts_recorded": {"facts": _facts},
    "session_started": {"task": _text},
    "session_ended": {"status": _text},  # free text: a person's words, or Claude Code's reason
    "memory_accessed": {"query": _text},
    "learning_feedback": {"reason": _text},
    "learning_edited": {"text": _text, "reason": _text},
    "memory_file_written": {"path": _text, "text": _text, "actor": _text},
    "memory_file_renamed": {"old_path": _text, "new_path": _text, "actor": _text},
    "memory_file_deleted": {"path": _text, "actor": _text},
    "messages_request": {"body_params": _text, "added": _list},
    "messages_response": {"body": _text},
    "store_put": {"value": _empty},
    "checkpoint": {"checkpoint": _empty, "metadata": _empty, "blobs": _empty},
    "checkpoint_writes": {"writes": _list},
}
"""Per type, the fields sealed and the placeholder each keeps in the clear record: every field
that holds free text. What stays in the clear is structure: ids, seqs, counts, hashes, scope
names, and codes from a fixed set (a phase is one of the configured phases, a learning's kind
and scope are enumerated)."""

USER_KEYED = frozenset(
    {"learning", "memory_file_written", "memory_file_renamed", "memory_file_deleted"}
)
"""Types a user writes outside any session (to the workspace's own log) naming themself
(``user``): sealed under that user's key alone, so forgetting the user shreds them."""

DROPPED_FIELDS = ("meta", "origin")
"""Fields of any type that are sealed and left out of the clear record (they are optional)."""

_SEALED_NAMES = {kind: (*rules, *DROPPED_FIELDS) for kind, rules in CONTENT_FIELDS.items()}
_NO_RULES: dict[str, Callable[[Any], Any]] = {}


class KeyStore(Protocol):
    """Where data keys live: a folder of key files, or a KMS behind the same calls."""

    def key(self, kid: str, *, create: bool) -> bytes | None:
        """The 32-byte key ``kid`` (made when missing and ``create``; else None)."""
        ...

    def destroy(self, kid: str) -> bool:
        """Destroy key ``kid`` for good; whether it existed. A store that keeps copies of
        keys for a while may also have ``uncache(kid)``: forget the copy, so the next ``key``
        asks where the key lives (``Sealer.uncache``)."""
        ...


class FileKeyStore:
    """One key file per key id under ``folder`` (mode 0600, the folder 0700)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cache: dict[str, tuple[tuple[int, ...], bytes]] = {}  # kid -> (file id, key)
        self._mutex = threading.Lock()

    def _path(self, kid: str) -> Path:
        if not kid.isalnum():
            raise KeyStoreError(f"key id {kid!r} is not alphanumeric")
        return self.folder / f"{kid}.key"

    def key(self, kid: str, *, create: bool) -> bytes | None:
        """See ``KeyStore.key``; a new key is written with ``O_EXCL`` and synced, so two
        processes making the same key agree on one. The file is looked at on every call (a
        cached key is used only while the same file holds it): a key another process
        destroyed is gone here too, at once."""
        with self._mutex:
            path = self._path(kid)
            try:
                found = os.stat(path, follow_symlinks=False)
                file_id = (found.st_dev, found.st_ino, found.st_ctime_ns)
                known = self._cache.get(kid)
                if known is not None and known[0] == file_id:
                    return known[1]
                data = _read_key(path)
            except FileNotFoundError:
                self._cache.pop(kid, None)
                if not create:
                    return None
                data = self._create(path)
                found = os.stat(path, follow_symlinks=False)
                file_id = (found.st_dev, found.st_ino, found.st_ctime_ns)
            except OSError as exc:
                raise KeyStoreError(f"{path}: {_why(exc)}") from exc
            if len(data) != 32:
                raise KeyStoreError(f"{path}: a key file holds 32 bytes (found {len(data)})")
            self._cache[kid] = (file_id, data)
            return data

    def _create(self, path: Path) -> bytes:
        """A new key, written and synced under a name of its own, then linked at ``path``:
        another process never reads it before it is whole, and of two making it at once the
        first to link wins (the other reads its key)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = os.urandom(32)
        temp = path.with_name(f".{path.stem}.{os.urandom(8).hex()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                os.write(fd, key)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(temp, path, follow_symlinks=False)
        except FileExistsError:
            return _read_key(path)  # another process made it first: theirs is the key
        finally:
            temp.unlink(missing_ok=True)
        _sync_dir(self.folder)
        return key

    def destroy(self, kid: str) -> bool:
        """Overwrite the key file, remove it and sync the folder."""
        with self._mutex:
            self._cache.pop(kid, None)
            path = self._path(kid)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise KeyStoreError(f"{path}: {_why(exc)}; the key is not destroyed") from exc
            try:
                os.write(fd, b"\0" * 32)
                os.fsync(fd)
            finally:
                os.close(fd)
            path.unlink()
            _sync_dir(self.folder)
            return True


def _read_key(path: Path) -> bytes:
    """A key file's bytes, never through a symlink: a link put in place of a key file would
    make the store read, and ``destroy`` leave, key material it does not own."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return os.read(fd, 33)
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    import errno

    if exc.errno == errno.ELOOP:
        return "a symlink stands where a key file should be (refused: not a regular key file)"
    return exc.strerror or str(exc)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=4096)
def key_id(subject: str) -> str:
    """The id of a subject's key (``user:ana``, ``session:s1``): derived, never listed."""
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    return hashlib.sha256(b"airsspec-key\0" + subject.encode("utf-8")).hexdigest()[:32]


def nested_kid(outer: str, inner: str) -> str:
    """The id of the key derived from keys ``outer`` (a user's) and ``inner`` (a session's)."""
    return f"{outer}.{inner}"


def kid_parts(kid: str) -> tuple[str, ...]:
    """The key ids a (possibly nested) key id is made of: destroying any one shreds it."""
    return tuple(kid.split("."))


def learning_subject(learning_id: str) -> str:
    """The subject of the key sealing what is said about learning ``learning_id``."""
    return f"learning:{learning_id}"


@functools.lru_cache(maxsize=4096)
def _aad(session: str, kind: str) -> bytes:
    return f"airsspec-sealed\0{session}\0{kind}".encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Sealer:
    """Seals bodies at append and opens records at read (see the module). ``owners`` names
    the user owning a session (None: unowned); only ``mode = "user"`` asks it."""

    def __init__(self, mode: EncryptMode, keys: KeyStore, owners: Owners | None = None) -> None:
        self.mode = mode
        self.keys = keys
        self.owners: Owners = owners or NoOwners()
        self._ciphers: dict[str, tuple[bytes, Any, float]] = {}  # kid -> key, AESGCM, checked

    def _cipher(self, kid: str, *, create: bool) -> Any:
        """The AES-GCM cipher of key ``kid`` (None when the key is gone); a nested id
        (``nested_kid``) names the key derived from both of its keys (None when either is
        gone). The key store is asked again once ``KEY_RECHECK_SECONDS`` have passed: a key
        destroyed by another process (``forget``) stops opening records here too, and a key
        made again is not confused with the old one."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        now = time.monotonic()
        known = self._ciphers.get(kid)
        if known is not None and now - known[2] < KEY_RECHECK_SECONDS:
            return known[1]
        key = self._key(kid, create=create)
        if key is None:
            self._ciphers.pop(kid, None)
            return None
        cipher = known[1] if known is not None and known[0] == key else AESGCM(key)
        self._ciphers[kid] = (key, cipher, now)
        return cipher

    def _key(self, kid: str, *, create: bool) -> bytes | None:
        parts = kid_parts(kid)
        if len(parts) == 1:
            return self.keys.key(kid, create=create)
        outer, inner = (self.keys.key(part, create=create) for part in parts)
        if outer is None or inner is None:
            return None
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        # both keys are secret and random: either destroyed, the derived key cannot be made
        return HKDF(hashes.SHA256(), 32, salt=inner, info=b"airsspec-nested-key").derive(outer)

    def uncache(self, kids: Iterable[str]) -> None:
        """Forget this sealer's ciphers of keys ``kids`` (nested ones included) and its key
        store's copies: keys another machine destroyed (its ``forgotten`` event names them)
        open no record here from now on, not even until their recheck."""
        gone = set(kids)
        self._drop_ciphers(gone)
        uncache = getattr(self.keys, "uncache", None)  # only a store that keeps copies has it
        if uncache is not None:
            for kid in gone:
                uncache(kid)

    def forget_key(self, kid: str) -> bool:
        """Destroy key ``kid`` (see ``KeyStore.destroy``) and this sealer's ciphers of it,
        nested ones included (one kept would open records until its recheck)."""
        self._drop_ciphers({kid})
        return self.keys.destroy(kid)

    def _drop_ciphers(self, kids: set[str]) -> None:
        """Forget this sealer's ciphers of keys ``kids``, nested ones included."""
        for known in [k for k in self._ciphers if kids & set(kid_parts(k))]:
            del self._ciphers[known]

    def subject(self, session: str, body: dict[str, Any]) -> str:
        """Whose key seals ``body`` of ``session``: the user a learning or a memory file names
        (``USER_KEYED``: written outside a session), else (``mode = "user"``) the user owning
        the session now (``owners``: after an admin gave it to another user, that user), else
        the session. What a context build gave a session is sealed as that session's; a reason
        given for a learning's verdict, and a person's edit of it, are sealed under a key of
        that learning, destroyed when its owner is forgotten (neither record can name the
        owner)."""
        if body["type"] in ("learning_feedback", "learning_edited"):
            return learning_subject(body["learning_id"])
        if body["type"] == "memory_accessed":
            session = body["reader"]
        elif body["type"] in USER_KEYED and body.get("user"):
            return f"user:{body['user']}"
        if self.mode == "user" and (user := self.owners.now(session)) is not None:
            return f"user:{user}"
        return f"session:{session}"

    def kid(self, session: str, body: dict[str, Any]) -> str:
        """The id of the key sealing ``body`` of ``session``: its subject's key; a user's
        session record (``mode = "user"``) is sealed under a key nested in the user's and the
        session's keys (``nested_kid``), so forgetting the user or that one session shreds it."""
        subject = self.subject(session, body)
        if not subject.startswith("user:") or (body["type"] in USER_KEYED and body.get("user")):
            return key_id(subject)
        reader = body["reader"] if body["type"] == "memory_accessed" else session
        return nested_kid(key_id(subject), key_id(f"session:{reader}"))

    def sealed_now(
        self, session: str, size: int, bodies: list[dict[str, Any]], clear: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """``bodies`` (``clear`` as ``seal_all`` sealed it), or ``clear`` sealed again when the
        owner of ``session`` (its file ``size`` bytes long) may have changed since
        (``Owners.moved``: asked under the session's lock, so a batch sealed for ana just
        before an admin gave the session to ben is sealed for ben, as it lands after the
        assignment)."""
        if self.mode != "user" or not self.owners.moved(session, size):
            return bodies
        again = [dict(body) for body in clear]
        self.seal_all(session, again)
        return again

    def seal_all(self, session: str, bodies: Iterable[dict[str, Any]]) -> None:
        """Seal the content of each body in place (nothing when ``mode`` is off)."""
        if self.mode == "off":
            return
        bodies = bodies if isinstance(bodies, list) else list(bodies)
        nonces = os.urandom(12 * len(bodies))  # one system call per batch
        dumps, sort = orjson.dumps, orjson.OPT_SORT_KEYS
        for index, body in enumerate(bodies):
            kind = body["type"]
            if kind in OWNING_TYPES and body.get("user") and self.mode == "user":
                self.owners.remember(session, body["user"], assigned=kind == "session_assigned")
            rules = CONTENT_FIELDS.get(kind, _NO_RULES)
            names = [n for n in _SEALED_NAMES.get(kind, DROPPED_FIELDS) if body.get(n) is not None]
            if not names:
                continue
            kid = self.kid(session, body)
            plain = dumps({n: body[n] for n in names}, option=sort)
            nonce = nonces[12 * index : 12 * index + 12]
            cipher = self._cipher(kid, create=True)
            sealed = cipher.encrypt(nonce, plain, _aad(session, kind))
            for name in names:
                if name in rules:
                    body[name] = rules[name](body[name])
                else:
                    del body[name]
            body["sealed"] = {"kid": kid, "nonce": _b64(nonce), "ct": _b64(sealed)}

    def open(self, data: dict[str, Any]) -> dict[str, Any]:
        """The stored record ``data`` with its sealed fields opened; when the key is gone,
        its placeholders read ``FORGOTTEN`` and ``forgotten`` is set."""
        from cryptography.exceptions import InvalidTag

        sealed = data.pop("sealed")
        cipher = self._cipher(sealed["kid"], create=False)
        if cipher is not None:
            try:
                plain = cipher.decrypt(
                    base64.b64decode(sealed["nonce"]),
                    base64.b64decode(sealed["ct"]),
                    _aad(data["session"], data["type"]),
                )
                data.update(orjson.loads(plain))
                return data
            except (InvalidTag, ValueError):
                pass  # a key made again after forgetting: the old content stays forgotten
        for name, placeholder in CONTENT_FIELDS.get(data["type"], {}).items():
            if name in data:
                data[name] = _forgotten(placeholder(data[name]))
        data["forgotten"] = True
        return data


def _forgotten(value: Any) -> Any:
    """A placeholder with ``SEALED`` read as ``FORGOTTEN`` (nested, for chunks)."""
    if value == SEALED:
        return FORGOTTEN
    if isinstance(value, list):
        return [_forgotten(v) for v in value]
    if isinstance(value, dict):
        return {k: _forgotten(v) for k, v in value.items()}
    return value


def is_forgotten(record: Any) -> bool:
    """Whether a record read from the log had its content forgotten (its key destroyed)."""
    extra = record.__pydantic_extra__
    return bool(extra) and bool(extra.get("forgotten"))

"""Where data keys live: the providers behind ``eventlog.crypto.KeyStore``.

A provider answers two calls: ``key(kid, create=...)`` (the 32-byte key, made when missing and
asked to) and ``destroy(kid)`` (gone for good, for everyone who shares the provider). Three are
built in:

- ``FileKeyStore`` (``eventlog.crypto``): one file per key under ``state/keys/``; the default
  for a log kept in the workspace's folder.
- ``BucketKeyStore``: one object per key under ``{[storage] url}/keys/`` on an S3-compatible
  bucket, made with a create-only PUT, so machines sharing the bucket agree on one key per
  subject and a key destroyed by one is destroyed for all (within ``recheck`` seconds); the
  default for a log kept on a bucket (``[storage] url``).
- ``CallbackKeyStore``: a KMS behind one callable, ``callback(action, kid)`` with ``action`` one
  of ``get`` (the key, or None), ``create`` (the key, made when missing: two callers must get
  the same one) and ``destroy`` (whether it existed). ``Memory.open(..., keys=...)`` takes such a
  callable or any object with the two calls.

``[privacy] keys`` names a key store, never code: ``local``, ``bucket``, or the name of an
entry point in the group ``airsspec.key_stores`` that an installed distribution declares
(``[project.entry-points."airsspec.key_stores"] vault = "mycompany_kms:key_store"``): a
factory called with no argument, returning a key store or a ``KeyCallback``.

Invariants: a provider never hands out a key that is not 32 bytes (``KeyStoreError``); its
failures are ``KeyStoreError`` (the caller can retry or fix access), never a third-party error.
Configuration never imports code by a module path: a repository's ``airsspec.toml`` can only
choose among the stores the installed environment offers, and the distributions are looked up
on ``sys.path`` without the working directory (a cloned repository's folder cannot declare
one).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from eventlog.crypto import FileKeyStore, KeyStore
from eventlog.errors import KeyStoreError, StorageError

if TYPE_CHECKING:  # importlib.metadata (with zipfile, csv, email) only when stores are listed
    from importlib.metadata import EntryPoint

KeyAction = Literal["get", "create", "destroy"]
KeyCallback = Callable[[KeyAction, str], "bytes | bool | None"]
"""A KMS as one callable (see the module)."""

ENTRY_POINT_GROUP = "airsspec.key_stores"
"""The entry point group naming installed key stores (see the module)."""

BUILT_IN = ("local", "bucket")
"""The key stores every installation has."""

KEYS_PREFIX = "keys"
"""The folder of key objects under a bucket's ``[storage] url``."""


def _checked(where: str, kid: str, key: Any) -> bytes | None:
    if key is None:
        return None
    if not isinstance(key, bytes | bytearray) or len(key) != 32:
        size = len(key) if isinstance(key, bytes | bytearray) else type(key).__name__
        raise KeyStoreError(f"{where}: key {kid} is not 32 bytes (got {size})")
    return bytes(key)


class CallbackKeyStore:
    """A ``KeyStore`` over a ``KeyCallback`` (see the module)."""

    def __init__(self, callback: KeyCallback, name: str = "key callback") -> None:
        self.callback = callback
        self.name = name

    def _call(self, action: KeyAction, kid: str) -> Any:
        try:
            return self.callback(action, kid)
        except KeyStoreError:
            raise
        except Exception as exc:  # a KMS client's own errors: wrapped at the boundary
            raise KeyStoreError(f"{self.name}: {action} {kid} failed: {exc}") from exc

    def key(self, kid: str, *, create: bool) -> bytes | None:
        """See ``KeyStore.key``."""
        key = _checked(self.name, kid, self._call("create" if create else "get", kid))
        if key is None and create:
            raise KeyStoreError(f"{self.name}: create {kid} returned no key")
        return key

    def destroy(self, kid: str) -> bool:
        """See ``KeyStore.destroy``."""
        return bool(self._call("destroy", kid))


class BucketKeyStore:
    """One object per key under ``keys/`` of a bucket (see the module). ``store`` is an
    ``eventlog.storage.objects.ObjectStore`` (its requests, errors and retries); a key read
    is kept ``recheck`` seconds before the bucket is asked again (a GET per record would cost
    more than the sealing)."""

    # Its object-store client runs a runtime of its own that a forked worker must not inherit.
    forkable = False

    def __init__(self, store: Any, recheck: float = 1.0) -> None:
        self.store = store
        self.recheck = recheck
        self._cache: dict[str, tuple[bytes, float]] = {}
        self._mutex = threading.Lock()

    def _object(self, kid: str) -> str:
        if not kid.isalnum():
            raise KeyStoreError(f"key id {kid!r} is not alphanumeric")
        return f"{KEYS_PREFIX}/{kid}.key"

    def key(self, kid: str, *, create: bool) -> bytes | None:
        """See ``KeyStore.key``: a new key is PUT only if absent; who loses reads the
        winner's."""
        import os

        from obstore.exceptions import AlreadyExistsError

        name = self._object(kid)
        with self._mutex:
            known = self._cache.get(kid)
            if known is not None and time.monotonic() - known[1] < self.recheck:
                return known[0]
            try:
                got = self.store._get(name)  # the store's GET: its errors and retries
                if got is None and create:
                    fresh = os.urandom(32)
                    try:
                        self.store._create(name, fresh)  # create-only PUT
                        got = (fresh, "")
                    except AlreadyExistsError:  # another machine made it first: theirs
                        got = self.store._get(name)
            except StorageError as exc:
                raise KeyStoreError(f"{exc}") from exc
            if got is None:
                self._cache.pop(kid, None)
                return None
            key = _checked(f"{self.store.url}/{name}", kid, got[0])
            assert key is not None
            self._cache[kid] = (key, time.monotonic())
            return key

    def uncache(self, kid: str) -> None:
        """Forget the copy of key ``kid`` kept ``recheck`` seconds (``KeyStore.destroy``)."""
        with self._mutex:
            self._cache.pop(kid, None)

    def destroy(self, kid: str) -> bool:
        """Delete the key's object (a bucket that keeps old versions keeps it too: use one
        without versioning, or expire noncurrent versions)."""

        name = self._object(kid)
        with self._mutex:
            self._cache.pop(kid, None)
            try:
                existed = self.store._get(name) is not None
                if existed:
                    self.store.delete_object(name)
            except StorageError as exc:
                raise KeyStoreError(f"{exc}; the key is not destroyed") from exc
            return existed


def as_key_store(given: KeyStore | KeyCallback) -> KeyStore:
    """``given`` as a ``KeyStore``: an object with ``key`` and ``destroy`` as it is, a
    callable wrapped in a ``CallbackKeyStore``."""
    if hasattr(given, "key") and hasattr(given, "destroy"):
        return given
    if callable(given):
        return CallbackKeyStore(given)
    raise KeyStoreError(f"{given!r} is neither a key store nor a key callback")


def _trusted_path() -> list[str]:
    """``sys.path`` without the working directory (``""``, or the folder itself, as ``python
    -m`` and ``-c`` put it first): where installed distributions are looked up."""
    here = os.path.realpath(os.getcwd())
    return [p for p in sys.path if p and os.path.realpath(p) != here]


def installed_key_stores() -> dict[str, EntryPoint]:
    """The key stores installed distributions declare (``ENTRY_POINT_GROUP``), by name; the
    first one found on the trusted path wins, as for an import."""
    from importlib.metadata import distributions

    found: dict[str, EntryPoint] = {}
    for dist in distributions(path=_trusted_path()):
        for point in dist.entry_points.select(group=ENTRY_POINT_GROUP):
            found.setdefault(point.name, point)
    return found


def key_store_names() -> list[str]:
    """Every name ``[privacy] keys`` accepts here: the built-in ones, then the installed ones."""
    return [*BUILT_IN, *sorted(set(installed_key_stores()) - set(BUILT_IN))]


def installed_key_store(name: str) -> KeyStore:
    """The key store the installed entry point ``name`` makes (its factory called with no
    argument); ``KeyStoreError`` when none is installed under that name, or it fails."""
    point = installed_key_stores().get(name)
    if point is None:
        known = ", ".join(key_store_names())
        raise KeyStoreError(f"[privacy] keys = {name!r}: no key store of that name; known: {known}")
    try:
        made = point.load()()
    except Exception as exc:  # a plugin's own failure, wrapped at the boundary
        raise KeyStoreError(f"[privacy] keys = {name!r} ({point.value}): {exc}") from exc
    return as_key_store(made)


def open_key_store(
    spec: str | None, local: Path, bucket: Callable[[], Any] | None
) -> tuple[KeyStore, bool]:
    """The key store ``[privacy] keys`` names (``spec``): ``local`` (files under ``local``),
    ``bucket`` (``bucket()`` gives the ObjectStore of ``[storage] url``), an installed key
    store's name, or None: beside the log (the bucket's when there is one). Also whether it is
    the local folder (with encryption off and no folder, no key was ever made there)."""
    chosen = spec or ("bucket" if bucket is not None else "local")
    if chosen == "local":
        return FileKeyStore(local), True
    if chosen == "bucket":
        if bucket is None:
            raise KeyStoreError('[privacy] keys = "bucket" needs [storage] url')
        return BucketKeyStore(bucket()), False
    return installed_key_store(chosen), False

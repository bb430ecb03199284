"""A lease on a bucket: one holder at a time across machines, for a shared tier's writer.

``locks/{name}`` holds the holder's id and when the lease expires. Invariants:

- Taken by creating the object (``If-None-Match: *``) or, once the holder's lease has
  expired, by replacing it with ``If-Match`` on the ETag read: of two machines taking it at
  once, exactly one succeeds.
- Kept by renewing it with ``If-Match`` (a thread, every third of ``ttl``) while held; a renewal
  refused means another holder took it over (this one was too slow): ``lost`` becomes true. Before
  each write the lease guards, the holder calls ``check``, which renews it at once: a holder
  whose lease was taken over stops before that write.
- Released by writing it expired with ``If-Match``, never by an unconditional delete, so a
  release can never remove a lease another machine took over.

A holder whose process dies keeps nobody waiting longer than ``ttl``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from eventlog.errors import LeaseLostError, LeaseTimeoutError, StorageError

try:  # the s3 extra: a bucket's one dependency beyond the core
    import obstore
    from obstore.exceptions import AlreadyExistsError, PreconditionError
except ImportError as exc:
    raise StorageError(
        "a bucket ([storage] url) needs the s3 extra: pip install 'airsspec-memory[s3]'"
    ) from exc

POLL_S = 0.2  # how often a waiting machine looks again


class Lease:
    """The lease ``name`` on ``store`` (an ``ObjectStore``), held ``ttl`` seconds per renewal."""

    def __init__(self, store: Any, name: str, ttl: float = 60.0) -> None:
        self.store = store
        self.key = f"locks/{name}"
        self.ttl = ttl
        self.holder = uuid.uuid4().hex
        self.lost = False
        self._etag: str | None = None
        self._stop = threading.Event()
        self._renewing = threading.Lock()  # the renewer thread and ``check`` share the ETag

    def _body(self, expires: float) -> bytes:
        return orjson.dumps({"holder": self.holder, "expires": expires})

    def _put(self, mode: Any, expires: float) -> str:
        put = self.store._call(
            "PUT", self.key, obstore.put, self.key, self._body(expires), mode=mode
        )
        return put["e_tag"] or ""

    def try_acquire(self) -> bool:
        """Take the lease if it is free or expired; True when this machine holds it now."""
        try:
            self._etag = self._put("create", time.time() + self.ttl)
            return True
        except AlreadyExistsError:
            pass
        got = self.store._get(self.key)
        if got is None:
            return False  # released and removed since: the next try creates it
        data, etag = got
        try:
            expires = float(orjson.loads(data)["expires"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            expires = 0.0  # unreadable: nobody can be relying on it
        if expires > time.time():
            return False
        try:
            self._etag = self._put({"e_tag": etag}, time.time() + self.ttl)
            return True
        except PreconditionError:
            return False  # another machine took it over first

    def renew(self) -> bool:
        """Extend the lease; False (and ``lost``) when another machine took it over."""
        with self._renewing:
            if self.lost:
                return False
            try:
                self._etag = self._put({"e_tag": self._etag}, time.time() + self.ttl)
                return True
            except PreconditionError:
                self.lost = True
                return False

    def check(self) -> None:
        """Renew the lease now, or raise ``LeaseLostError`` when another machine took it over.
        A holder calls it before each write the lease guards: one conditional PUT that proves
        the lease is still this machine's, so it writes nothing once it is not."""
        if self.lost or not self.renew():
            raise LeaseLostError(
                f"{self.store.url}/{self.key}: taken over by another machine; stopped before "
                "writing again (run it again)"
            )

    def release(self) -> None:
        """Write the lease expired, only if this machine still holds it."""
        self._stop.set()
        if self._etag is not None and not self.lost:
            try:
                self._put({"e_tag": self._etag}, 0.0)
            except PreconditionError:
                self.lost = True
        self._etag = None

    @contextmanager
    def held(self, wait_s: float = 600.0) -> Iterator[Lease]:
        """Hold the lease (waiting up to ``wait_s`` for it), renewed until the block ends."""
        deadline = time.monotonic() + wait_s
        while not self.try_acquire():
            if time.monotonic() > deadline:
                raise LeaseTimeoutError(
                    f"{self.store.url}/{self.key}: held by another machine for over {wait_s:g} s"
                )
            time.sleep(POLL_S)
        self._stop.clear()
        renewer = threading.Thread(target=self._keep, daemon=True)
        renewer.start()
        try:
            yield self
        finally:
            self._stop.set()
            renewer.join()
            self.release()

    def _keep(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            if not self.renew():
                return

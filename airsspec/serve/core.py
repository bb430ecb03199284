"""The served memory: one ``Memory`` for the whole process, one lock, and the background work.

Every call from the HTTP API, the MCP tools, the viewer and the hooks endpoint runs in a worker
thread under one lock (``Served.call``), so the tiers a call folds in this process (hot after an
append, learnings after a read) are never written by two threads at once. The cold tier is
embedded by the daemon's ``ColdIndexer`` thread outside that lock, so a search never waits for a
catch-up: it answers from what is indexed and says how many records are not yet (``ops``). Appends
made by other processes (and, on a bucket, by other machines) are noticed by the daemon's own
watch loop, run in a thread of the server (``Background``), and the daemon's step (hot,
compaction and learnings when due, warm, then a cold request) runs for the sessions that
changed. When another ``airsspec watch`` already holds the workspace, the server leaves the
background work to it.

Each request acts for a principal (a token's user); ``view`` is that user's scoped memory
(``Memory.scoped(user=...)``, read-only for a read-only token), and the access gate of that
memory (``memory.scopes``) decides what it may read and write. An admin (an admin token, or
the local token of the user who started the server, in the discovery file) is unscoped, as
the CLI is, unless a request narrows it (``X-Airsspec-User``/``-Agent``/``-Project``).

A viewer's sign-in (``sign_in``) is a random handle this process alone holds, standing for the
token the form was given: the cookie carries the handle, never the token, since a browser sends
a host's cookies to every port of it (any other local server it is led to reads them). A handle
opens only the viewer, and ends at sign-out, after ``SIGN_IN_SECONDS``, when its token is
revoked, or when the server stops.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from time import monotonic
from typing import Any

from airsspec.errors import DaemonBusyError, ReadOnlyTokenError
from airsspec.serve.tokens import Principal, TokenStore

log = logging.getLogger("airsspec.serve")
MAX_VIEWS = 64  # scoped views kept between requests
SIGN_IN_SECONDS = 12 * 3600  # a viewer's sign-in lasts this long, then the form again
SIGN_INS_PER_TOKEN = 32  # a token's sign-ins held at once: beyond, its oldest ends


class Served:
    """One workspace's memory as the server holds it (see the module)."""

    def __init__(self, memory: Any, *, local_user: str, background: bool = True) -> None:
        self.memory = memory
        self.lock = threading.RLock()
        self.tokens = TokenStore(memory.root)
        # The token of the user who started the server, written only to the discovery file
        # (mode 0600): local clients (hooks, the CLI) read it there.
        self.local_token = "airs_local_" + secrets.token_urlsafe(32)
        self.local = Principal(local_user, False, "local", admin=True, local=True)
        self._views: OrderedDict[Any, Any] = OrderedDict()  # the latest MAX_VIEWS scopes
        self._sign_ins: OrderedDict[str, tuple[str, float]] = OrderedDict()  # handle: token, end
        self._sign_lock = threading.Lock()
        self._later: list[threading.Thread] = []
        self.background = Background(self) if background else None

    # ------------------------------------------------------------------ who

    def principal(self, token: str | None) -> Principal | None:
        """Who ``token`` acts for, or None when it is not valid."""
        if not token:
            return None
        # As bytes: a header decodes as latin-1, and ``compare_digest`` refuses a str that
        # is not ASCII (a TypeError, answered 500, for any such token).
        if secrets.compare_digest(
            token.encode("utf-8", "surrogateescape"), self.local_token.encode()
        ):
            return self.local
        return self.tokens.lookup(token)

    def sign_in(self, token: str) -> str:
        """A new sign-in of the viewer for ``token`` (a valid one): the handle its cookie
        carries in place of the token."""
        handle = secrets.token_urlsafe(32)
        with self._sign_lock:
            now = monotonic()
            for held, (_, until) in list(self._sign_ins.items()):  # the ended go first
                if now >= until:
                    del self._sign_ins[held]
            # a token's own sign-ins make room for it: one user signing in again and again
            # never ends another's
            own = [held for held, (given, _) in self._sign_ins.items() if given == token]
            for held in own[: max(0, len(own) - SIGN_INS_PER_TOKEN + 1)]:
                del self._sign_ins[held]
            self._sign_ins[handle] = (token, now + SIGN_IN_SECONDS)
        return handle

    def signed_in(self, handle: str | None) -> str | None:
        """The token the sign-in ``handle`` stands for; None when there is no such sign-in
        (never made here, signed out, or past its time)."""
        if not handle:
            return None
        with self._sign_lock:
            token, until = self._sign_ins.get(handle, (None, 0.0))
            if token is not None and monotonic() >= until:
                del self._sign_ins[handle]
                return None
            return token

    def sign_out(self, handle: str | None) -> None:
        """End the sign-in ``handle`` (if there is one)."""
        with self._sign_lock:
            self._sign_ins.pop(handle or "", None)

    def view(self, principal: Principal) -> Any:
        """The memory as ``principal`` may see and change it (``Memory.scoped`` to its scope,
        read-only for a read-only token): the access gate (``memory.scopes``) decides the rest."""
        fields = dict(principal.scope)
        if not principal.admin:  # a user's token is that user's, whatever else is named
            fields["user"] = principal.user
        if not fields and not principal.read_only:  # an admin's view: all of it
            return self.memory
        # Kept for the next request of the same scope, but not every scope ever asked for:
        # the agent and project headers are the caller's to choose.
        key = (tuple(sorted(fields.items())), principal.read_only)
        view = self._views.pop(key, None) or self.memory.scoped(
            **fields, read_only=principal.read_only
        )
        self._views[key] = view
        while len(self._views) > MAX_VIEWS:
            self._views.popitem(last=False)
        return view

    # ------------------------------------------------------------------ calls

    def call(self, principal: Principal, fn: Callable[[Any], Any], *, writes: bool = False) -> Any:
        """``fn(view)`` under the lock; ``writes`` refused for a read-only principal."""
        if writes and principal.read_only:
            raise ReadOnlyTokenError(
                f"the token of {principal.user!r} is read-only; this request writes"
            )
        with self.lock:
            return fn(self.view(principal))

    def later(self, principal: Principal, fn: Callable[[Any], Any]) -> None:
        """``fn(view)`` in a thread of its own, after the caller has its answer (a hook's
        deferred work); a failure is logged."""

        def work() -> None:
            try:
                self.call(principal, fn, writes=True)
            except Exception:  # degrade, never crash: the next hook or step retries
                log.exception("deferred work failed")

        thread = threading.Thread(target=work, name="serve-later", daemon=True)
        self._later = [t for t in self._later if t.is_alive()] + [thread]
        thread.start()

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        """Start the background work (when asked for and no other daemon holds it)."""
        if self.background is not None:
            self.background.start()

    def stop(self) -> None:
        """Finish deferred work, then stop the background work, saving what it did."""
        for thread in self._later:
            thread.join(60)
        if self.background is not None:
            self.background.stop()


class Background:
    """The daemon's own watch loop (``Daemon.watch``: the bucket followed, the first catch-up,
    a step per change, documents registered), driven in a thread of the server, each step
    under the served memory's lock; the cold indexer beside it, as in ``airsspec watch``."""

    def __init__(self, served: Served) -> None:
        self.served = served
        from airsspec.daemon import Daemon

        self.daemon = Daemon(served.memory)
        self.daemon.step_lock = served.lock
        self.held = False
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Take the watch lock (as ``serve``) and start the watch loop and the cold indexer."""
        try:
            self.daemon.acquire("serve")
        except DaemonBusyError as exc:
            log.warning("airsspec serve: background work left to the running daemon: %s", exc)
            return
        self.held = True
        self.daemon.cold.start()
        self.thread = threading.Thread(target=self._watch, name="serve-watch", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        try:
            self.daemon.watch()
        except Exception:  # degrade, never crash the server: its requests still answer
            log.exception("background watch stopped; searches read what is not indexed yet")

    def stop(self) -> None:
        """Stop the loop and the cold indexer (which saves what it embedded)."""
        if not self.held:
            return
        self.daemon.stop_event.set()
        if self.thread is not None:
            self.thread.join(10)
        self.daemon.cold.stop()
        self.daemon.release()
        self.held = False

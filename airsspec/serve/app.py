"""The ASGI application of ``airsspec serve`` (Starlette on uvicorn), and running it.

Routes: ``/v1/...`` the HTTP API (``api``), ``/mcp`` the MCP server over streamable HTTP (the
official SDK's session manager, the tools of ``ops``), ``/`` the viewer (``viewer``). Every
request but ``GET /v1/health``, the login page and static files needs a token: a bearer token
(``Authorization: Bearer ...``); for the viewer's pages also its HttpOnly cookie, set only by the
sign-in form posted from our own origin (never by a token in a url, which any page could link to
and which stays in histories), holding a sign-in of this process (``Served.sign_in``), never the
token. The token decides the user whose scoped memory the request sees;
the scope headers (``X-Airsspec-User/-Agent/-Project``, percent-encoded UTF-8) narrow it. What a
page of another origin could make a browser send is refused (``BrowserGuard``), no answer is kept
in a cache (``Cache-Control: no-store``), no body beyond ``api.MAX_BODY`` is taken in
(``BodyLimit``), and no more than ``[serve] max_connections`` connections are answered at once
(a request on one more: 503, ``uvicorn_config``).

Discovery: while it runs, the server keeps ``state/serve.json`` (url or socket, pid, and the
token of the user who started it; mode 0600) so local clients find it (``airsspec.client``).
One server per workspace: a second refuses to start, naming the first, unless the first is dead
(its file is then taken over, and it says so). Each removes at exit only its own file (same pid
and token), never another's. A client ignores a file whose pid is dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import signal
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from airsspec.errors import (
    AirsspecError,
    BodyTooLargeError,
    BodyTooSlowError,
    ServeError,
    TokenError,
)
from airsspec.serve import api
from airsspec.serve.core import Served
from airsspec.serve.tokens import COOKIE, Principal, scope_fields

OPEN_PATHS = ("/v1/health", "/login", "/static/")
API_PATHS = ("/v1/", "/mcp")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
PAGE_HEADERS = [  # the viewer's pages: only our own script and styles, never in a frame
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; "
        b"img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer makes a browser send Origin: null
]
NO_STORE = (b"cache-control", b"no-store")  # a page or answer holds memory: never kept
DAMAGED_TOKENS = (
    "the server's token file (auth/tokens.json) is damaged; its owner must fix or remove it "
    "(airsspec token list says what is wrong)"
)


class PrincipalUser(BaseUser):
    """An authenticated request's user (Starlette's ``request.user``)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        """Always: an unauthenticated request has no ``PrincipalUser``."""
        return True

    @property
    def display_name(self) -> str:
        """The user's name."""
        return self.principal.user


def request_token(conn: HTTPConnection, served: Served) -> str | None:
    """The token a request carries: the bearer header; for the viewer's pages also the one
    its cookie's sign-in stands for. The API and MCP take only the header: a browser sends the
    cookie by itself, to a form of any page of the same site (another local port is one). A
    token in a url is never taken: it ends up in logs and histories, and any page could sign a
    browser in with it."""
    header = conn.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    if conn.url.path.startswith(API_PATHS):
        return None
    return served.signed_in(conn.cookies.get(COOKIE))


class RequestRefused(AuthenticationError):
    """A request that cannot be authenticated for a reason of its own (a scope header that
    is not a name) or of the server's (a damaged token file): answered ``status``, never 500
    text."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def refused(conn: HTTPConnection, exc: Exception) -> Any:
    """The problem answer of a ``RequestRefused`` (Starlette's ``on_error``)."""
    if isinstance(exc, RequestRefused):
        return api.problem(exc.status, exc.detail)
    return api.problem(400, str(exc))


class TokenBackend(AuthenticationBackend):
    """Starlette authentication by the workspace's tokens."""

    def __init__(self, served: Served) -> None:
        self.served = served

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        """The principal of the request's token, or None (unauthenticated)."""
        try:
            principal = self.served.principal(request_token(conn, self.served))
        except TokenError as exc:  # the file, not the caller: the server's log names it
            logging.getLogger("airsspec.serve").error("%s", exc)
            raise RequestRefused(503, DAMAGED_TOKENS) from exc
        if principal is None:
            return None
        try:
            principal = principal.narrowed(scope_fields(conn.headers))
        except AirsspecError as exc:
            raise RequestRefused(exc.http_status, str(exc)) from exc
        scopes = ["read"] if principal.read_only else ["read", "write"]
        return AuthCredentials(scopes), PrincipalUser(principal)


class RequireToken:
    """Refuses (401) a request without a valid token, open paths aside."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass an authenticated request on; answer 401 (the viewer: the login page)."""
        path = scope.get("path", "")
        user = scope.get("user")
        if (
            scope["type"] != "http"
            or path.startswith(OPEN_PATHS)
            or isinstance(user, PrincipalUser)
        ):
            await self.app(scope, receive, send)
            return
        if not path.startswith(("/v1/", "/mcp")):
            from starlette.responses import RedirectResponse

            await RedirectResponse("/login", 303)(scope, receive, send)
            return
        response = api.problem(401, "a valid bearer token is needed (airsspec token create)")
        await response(scope, receive, send)


class BrowserGuard:
    """What a browser may be made to send by a page of another origin is refused here: a
    request naming a host other than loopback while the server listens only there (a DNS
    name rebound to 127.0.0.1, which would make that page same-origin with us), and a request
    that changes something sent with another page's ``Origin`` (a forged form). Every answer
    carries ``PAGE_HEADERS``."""

    def __init__(self, app: ASGIApp, *, loopback: bool) -> None:
        self.app = app
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse (403) what a foreign page sent; add the page headers to the rest."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        origin = headers.get("origin")
        refusal = None
        if self.loopback and not _loopback(name):
            refusal = f"host {host!r} is not this machine's loopback name"
        elif (
            scope["method"] not in SAFE_METHODS
            and origin is not None
            and origin.split("://", 1)[-1] != host
        ):
            refusal = f"a request from the page of {origin!r} may not change anything here"
        if refusal is not None:
            await api.problem(403, refusal)(scope, receive, send)
            return

        cached = scope.get("path", "").startswith("/static/")  # our own code, no memory

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                extra = PAGE_HEADERS if cached else [*PAGE_HEADERS, NO_STORE]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


CLOSE = (b"connection", b"close")
BODY_SECONDS = 30.0
"""How long each part of a request body may take to arrive after the head or the part before."""
MIN_BODY_RATE = 1024
"""Bytes a second a body must average, past its first ``BODY_SECONDS``: each part in time
alone let a byte every few seconds hold a connection without end."""


class BodyLimit:
    """No request body beyond ``api.MAX_BODY`` is taken in, on any route (the MCP transport
    reads a body whole, so does the sign-in form, open to anyone), nor beyond the MCP SDK's own
    limit on ``/mcp``: a declared length beyond it is answered 413 at once; a chunked body that
    grows beyond it is answered the same problem document, whatever the route. A body whose
    next part has not arrived ``BODY_SECONDS`` after the part before, or that has come slower
    than ``MIN_BODY_RATE`` past its first ``BODY_SECONDS``, is answered 408 and its
    connection closed (a client trickling a body held its connection without end). Only a body
    is timed: a stream's wait for its client to leave (``/mcp``'s) is not a body."""

    def __init__(self, app: ASGIApp, *, mcp_limit: int) -> None:
        self.app = app
        self.mcp_limit = min(mcp_limit, api.MAX_BODY)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or cut off a body too large; pass the rest on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.mcp_limit if scope.get("path", "").startswith("/mcp") else api.MAX_BODY
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            detail = f"request body of {int(declared)} bytes; at most {limit}"
            await api.problem(413, detail)(scope, receive, send)
            return
        seen = 0
        started = False
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        expecting = chunked or (declared.isdigit() and int(declared) > 0)  # a body to come
        slow = False  # the body stopped coming: whoever answers, the connection is closed
        loop = asyncio.get_running_loop()
        waited = 0.0  # seconds spent waiting for the body (not the app's own between reads)

        async def counted() -> Any:
            nonlocal seen, expecting, slow, waited
            if not expecting:
                return await receive()
            # the whole body's bound: its first seconds, then a least rate for what came
            left = BODY_SECONDS + seen / MIN_BODY_RATE - waited
            began = loop.time()
            try:
                if left <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), min(BODY_SECONDS, left))
            except TimeoutError:
                slow = True
                why = (
                    f"nothing more arrived in {BODY_SECONDS:g} s"
                    if left >= BODY_SECONDS
                    else f"arriving slower than {MIN_BODY_RATE} bytes a second"
                )
                raise BodyTooSlowError(f"request body: {why}") from None
            waited += loop.time() - began
            expecting = message["type"] == "http.request" and message.get("more_body", False)
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLargeError(f"request body beyond {limit} bytes")
            return message

        async def sending(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if slow:  # the rest of the body is never read
                    message = {**message, "headers": [*message["headers"], CLOSE]}
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except (BodyTooLargeError, BodyTooSlowError) as exc:  # read by a route that does not
            if started:  # answer it itself
                raise
            await api.problem(exc.http_status, str(exc))(scope, receive, sending)


HEAD_SECONDS = 30.0
"""How long a connection may take to send a request's head (its line and headers), from when
it opened or its previous answer was sent."""


def head_in_time() -> type[Any]:
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request head does not arrive
    within ``HEAD_SECONDS`` (uvicorn waits for one without end: a client sending a few bytes
    now and then, or none, held its connection, and enough of them every descriptor); an
    idle connection after an answer is closed sooner by uvicorn's keep-alive timeout."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadInTime(H11Protocol):
        _head_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._await_head()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:  # a head came
                self._head_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and (
                self.cycle is None or self.cycle.response_complete  # no next head yet
            ):
                self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._head_arrived()
            self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_late)

        def _head_arrived(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeadInTime


def uvicorn_config(app: ASGIApp, served: Served) -> Any:
    """How uvicorn runs ``app`` (``serve``, ``serving``): warnings only, the lifespan run, no
    access log, request heads in time (``head_in_time``), and ``[serve] max_connections`` as
    ``limit_concurrency``: uvicorn answers 503 to a request once the open connections, its own
    among them, reach the limit (or the running requests do), so the limit passed is one more
    than the connections answered at once."""
    import uvicorn

    return uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        access_log=False,
        http=head_in_time(),
        limit_concurrency=int(served.memory.settings.serve.max_connections) + 1,
    )


class ExactMCP:
    """The MCP transport behind a check of each body (``airsspec.mcp_server.inexact``): one a
    parser would read otherwise than it was sent (a key given twice: the SDK keeps one value)
    is answered 400 with its JSON-RPC error and never read; any other is passed on as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body whole (``BodyLimit`` bounds it), check it, pass it on."""
        from airsspec.mcp_server import inexact

        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        refused = inexact(body, notifications=True)
        if refused is not None:
            headers = [(b"content-type", b"application/json")]  # BrowserGuard adds no-store
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": refused})
            return
        given = False

        async def again() -> Any:
            nonlocal given
            if given:
                return await receive()
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, again, send)


def create_app(served: Served, *, host: str = "127.0.0.1") -> Starlette:
    """The application: API, MCP over HTTP and viewer over ``served``."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    from airsspec.mcp_server import build_server
    from airsspec.serve import viewer

    def run_tool(op: Any, arguments: Any, ctx: Any) -> Any:
        request = ctx.request_context.request
        user = request.scope.get("user") if request is not None else None
        if not isinstance(user, PrincipalUser):  # RequireToken lets none through; be sure
            raise api.BadRequestError("a valid bearer token is needed")
        try:
            principal = user.principal
            return served.call(
                principal, lambda m: op.call(m, arguments, principal.user), writes=not op.read_only
            )
        except AirsspecError as exc:  # as the API answers it: no path of this machine
            raise ToolError(api.public(served, str(exc))) from exc

    def may_write(ctx: Any) -> bool:
        request = ctx.request
        user = request.scope.get("user") if request is not None else None
        return isinstance(user, PrincipalUser) and not user.principal.read_only

    mcp = build_server(run_tool, may_write)
    mcp.streamable_http_app(host=host, stateless_http=True, json_response=True)
    manager = mcp.session_manager

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        served.start()
        try:
            async with manager.run():
                yield
        finally:
            served.stop()

    routes: list[Any] = [
        *api.routes(served),
        # No GET: a stateless server has no stream to offer, and a GET would be held open
        Route("/mcp", ExactMCP(StreamableHTTPASGIApp(manager)), methods=["POST", "DELETE"]),
        *viewer.routes(served),
    ]
    middleware = [
        Middleware(BrowserGuard, loopback=_loopback(host)),
        Middleware(BodyLimit, mcp_limit=DEFAULT_MAX_REQUEST_BODY_SIZE),  # the SDK's own
        Middleware(AuthenticationMiddleware, backend=TokenBackend(served), on_error=refused),
        Middleware(RequireToken),
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback: ``localhost`` or a
    loopback address, never a name that merely starts like one (``127.0.0.1.evil.example``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _clear_socket(path: str) -> None:
    """Make room for a Unix socket at ``path``: nothing there, or a stale socket (one nobody
    answers on, left by a server that died), which is removed. Anything else is refused and
    left as it is: a file (a session's log...), a folder, a link, or a live socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ServeError(f"--socket {path}: exists and is not a socket; refusing to remove it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        Path(path).unlink(missing_ok=True)  # stale: its server is gone
        return
    except OSError as exc:
        raise ServeError(f"--socket {path}: cannot check it: {exc.strerror or exc}") from exc
    finally:
        probe.close()
    raise ServeError(f"--socket {path}: a server already answers there; stop it first")


def bind(host: str, port: int, path: str | None) -> socket.socket:
    """The listening socket: a Unix socket at ``path``, else TCP ``host:port``."""
    if path is None and not host:
        raise ServeError("--host is empty (it would listen on every interface); name one")
    try:
        if path is not None:
            _clear_socket(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            mask = os.umask(0o177)  # made 0600: never open to others, not even for a moment
            try:
                sock.bind(path)
            finally:
                os.umask(mask)
            os.chmod(path, 0o600)
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted connections inherit it: a keep-alive answer written in two sends must
            # not wait for the client's delayed ACK (40 ms per request).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((host, port))
    except OSError as exc:
        where = path or f"{host}:{port}"
        raise ServeError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
    sock.listen(128)
    return sock


def address(sock: socket.socket) -> dict[str, Any]:
    """How a client reaches ``sock``: a url, and the socket path for a Unix socket."""
    if sock.family == socket.AF_UNIX:
        return {"url": "http://localhost", "socket": os.path.abspath(sock.getsockname())}
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return {"url": f"http://{shown}:{port}", "socket": None}


def state_path(memory: Any) -> Path:
    """The discovery file of ``memory``'s workspace."""
    return memory.workspace.layout.serve_info_path


def write_state(served: Served, where: dict[str, Any]) -> Path:
    """Write the discovery file (0600, whole then renamed)."""
    path = state_path(served.memory)
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {**where, "pid": os.getpid(), "user": served.local.user, "token": served.local_token}
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):  # a leftover, or a link planted there
        partial.unlink()
    # A new file of ours, never through a link: it is about to hold the local token.
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(info, out)
    partial.replace(path)
    return path


def remove_state(served: Served) -> None:
    """Remove the discovery file if it is this server's (its pid and its token): never the
    file of another server, which local clients would then stop finding."""
    path = state_path(served.memory)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        info = json.loads(path.read_text(encoding="utf-8"))
        if info.get("pid") == os.getpid() and info.get("token") == served.local_token:
            path.unlink()


def claim(served: Served) -> int:
    """Become the one server of the workspace: take its serve lock (held until ``release``,
    or this process's end, so a server that died leaves nothing held). Another live server
    holds it: ``ServeError`` naming it (pid, address). A discovery file left by a dead one is
    taken over, with a warning saying so. Returns the lock's descriptor."""
    lock = served.memory.workspace.layout.locks_dir / "serve.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    info = _discovery(served)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        where = info.get("socket") or info.get("url") or "an address not yet published"
        raise ServeError(
            f"another airsspec serve (pid {info.get('pid', '?')}) already serves "
            f"{served.memory.root} at {where}; stop it first"
        ) from None
    if info.get("pid") not in (None, os.getpid()):
        logging.getLogger("airsspec.serve").warning(
            "airsspec serve: taking over from a server that is gone (pid %s)", info.get("pid")
        )
    return fd


def _discovery(served: Served) -> dict[str, Any]:
    """The discovery file's content ({} when there is none or it is unreadable)."""
    try:
        info = json.loads(state_path(served.memory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def check_exposure(served: Served, host: str, path: str | None) -> None:
    """Refuse an empty host (it would bind every interface), and to listen beyond loopback
    while no token exists."""
    if path is None and not host:
        raise ServeError("--host is empty (it would listen on every interface); name one")
    if path is None and not _loopback(host) and not served.tokens.entries():
        raise ServeError(
            f"refusing to listen on {host} (beyond this machine) with no token configured; "
            "create one first: airsspec token create --user NAME"
        )


def serve(
    served: Served,
    *,
    host: str = "127.0.0.1",
    port: int = 8750,
    path: str | None = None,
    ready: Any = None,
) -> None:
    """Run the server until SIGINT/SIGTERM; ``ready(address)`` is called once it listens."""
    import uvicorn

    check_exposure(served, host, path)
    held = claim(served)
    try:
        sock = bind(host, port, path)
    except BaseException:
        os.close(held)
        raise
    ours = os.stat(path).st_ino if path is not None else None
    where = address(sock)
    app = create_app(served, host=host)
    server = uvicorn.Server(uvicorn_config(app, served))
    write_state(served, where)
    if ready is not None:
        ready(where)
    said = f"the Unix socket {where['socket']}" if where.get("socket") else where["url"]
    logging.getLogger("airsspec.serve").info("serving %s at %s", served.memory.root, said)
    # uvicorn stops on SIGINT/SIGTERM, then raises the signal again for the handler that was
    # there before it: that handler ignores it, so the discovery file is removed and the
    # command exits 0.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        remove_state(served)
        sock.close()
        with contextlib.suppress(OSError):
            if path is not None and os.lstat(path).st_ino == ours:  # ours, not a newer one
                Path(path).unlink()
        os.close(held)


@contextlib.contextmanager
def serving(
    served: Served, *, host: str = "127.0.0.1", port: int = 0, discover: bool = False
) -> Any:
    """Run the server in a thread of this process for the ``with`` block; yields its address
    (tests, benchmarks and the demo use it; ``serve`` is the command's blocking form). With
    ``discover``, the discovery file is written too, so local clients use it."""
    import threading

    import uvicorn

    held = claim(served) if discover else None
    sock = bind(host, port, None)
    app = create_app(served, host=host)
    server = uvicorn.Server(uvicorn_config(app, served))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:  # uvicorn sets it once the lifespan has started
            if not thread.is_alive():
                raise ServeError("the server stopped while starting (see its log)")
            thread.join(0.01)
        if discover:
            write_state(served, address(sock))
        yield address(sock)
    finally:
        if discover:
            remove_state(served)
        server.should_exit = True
        thread.join(30)
        sock.close()
        if held is not None:
            os.close(held)

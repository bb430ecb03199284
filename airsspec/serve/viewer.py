"""The web viewer at ``/``: the memory for people, served by the same process as the API.

Pages: the sessions (filtered by user, agent, date and text), one session's timeline (messages,
thoughts, tool calls paired with their results, errors marked, each compaction shown as its
summary with a link to exactly the records it covers), verify, learnings with their evidence,
and search with provenance. Server-rendered Jinja2 templates with autoescaping on, so stored
content is always shown as text, never run; a few lines of our own JavaScript, no build step, no
third-party code. Signing in sets an HttpOnly cookie holding the token, only by the form of
``/login`` posted from this server's own origin (the ``Origin`` header equal to ours, or
``Sec-Fetch-Site: same-origin``): another page cannot sign a browser in as someone else, and a
token in a url is never taken. Every page reads through the signed-in user's scoped memory, and
no page or error shows a path of the server's machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from airsspec.errors import AirsspecError
from airsspec.serve.api import problem, public
from airsspec.serve.core import Served
from airsspec.serve.tokens import COOKIE

HERE = Path(__file__).parent
ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
)
ENV.filters["pretty"] = lambda value: (  # a text result as it is; anything else as JSON
    value
    if isinstance(value, str)
    else json.dumps(value, indent=2, ensure_ascii=False, default=str)
)
MAX_RECORDS = 5000  # a timeline page shows at most this many records


def render(name: str, request: Request, status: int = 200, **values: Any) -> HTMLResponse:
    """A page from its template; ``user`` is the signed-in user, if any."""
    user = request.user.display_name if request.user.is_authenticated else None
    html = ENV.get_template(name).render(user=user, path=request.url.path, **values)
    return HTMLResponse(html, status)


async def _read(served: Served, request: Request, fn: Any) -> Any:
    principal = request.user.principal
    return await anyio.to_thread.run_sync(lambda: served.call(principal, fn))


def _session_row(info: Any, owner: Any) -> dict[str, Any]:
    row = {k: getattr(info, k, None) for k in ("session", "records", "first_ts", "last_ts")}
    row.update({k: getattr(owner, k, None) for k in ("user", "agent", "project")})
    row["problem"] = info.problem
    return row


def _matches(row: dict[str, Any], filters: dict[str, str], found: set[str] | None) -> bool:
    for key in ("user", "agent"):
        if filters[key] and filters[key].lower() not in str(row.get(key) or "").lower():
            return False
    day_from, day_to = filters["from"], filters["to"]
    if day_from and (row["last_ts"] or "") < day_from:
        return False
    if day_to and (row["first_ts"] or "") > day_to + "T23:59:59.999999Z":
        return False
    text = filters["text"]
    return not text or text.lower() in row["session"].lower() or row["session"] in (found or ())


def timeline(records: list[Any]) -> list[dict[str, Any]]:
    """The records as a timeline: an action carries its result, a compaction its span."""
    items: list[dict[str, Any]] = []
    actions: dict[str, dict[str, Any]] = {}
    for record in records:
        data = record.model_dump(mode="json", exclude_none=True)
        item = {"record": data, "type": record.type, "seq": record.seq, "result": None}
        if record.type == "observation" and data.get("action_id") in actions:
            actions[data["action_id"]]["result"] = data  # shown under its call
            continue
        if record.type == "action":
            actions[record.id] = item
        items.append(item)
    return items


def routes(served: Served) -> list[Any]:
    """The viewer's pages, its static files and the sign-in."""

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render("login.html", request, error=None)
        if not same_origin(request):
            return problem(403, "sign in from this server's own page (/login)")
        try:
            form = await request.form()
        except HTTPException as exc:  # the form parser's refusal, as every answer: a problem
            too_large = "maximum size" in str(exc.detail)
            return problem(413 if too_large else 400, f"sign-in form: {exc.detail}")
        token = str(form.get("token", "")).strip()
        if served.principal(token) is None:
            return render("login.html", request, 401, error="That token is not valid.")
        return signed_in(RedirectResponse("/", 303), token, request)

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE)
        return response

    async def sessions(request: Request) -> Response:
        filters = {
            k: request.query_params.get(k, "").strip()
            for k in ("user", "agent", "from", "to", "text")
        }

        def read(memory: Any) -> tuple[list[dict[str, Any]], set[str] | None]:
            owners = memory.scopes.owners()
            rows = [_session_row(info, owners.get(info.session)) for info in memory.sessions.list()]
            found = None
            if filters["text"]:
                hits = memory.search(filters["text"], k=100, fresh=False)["hits"]
                wanted = filters["text"].lower()  # semantic neighbours alone do not count
                found = {h["session"] for h in hits if h["session"] and wanted in h["text"].lower()}
            return rows, found

        rows, found = await _read(served, request, read)
        shown = [row for row in rows if _matches(row, filters, found)]
        shown.sort(key=lambda row: row["last_ts"] or "", reverse=True)
        return render("sessions.html", request, rows=shown, total=len(rows), filters=filters)

    async def session(request: Request) -> Response:
        name = request.path_params["session"]
        span = _span(request)

        def read(memory: Any) -> tuple[list[Any], dict[str, Any] | None]:
            records = []
            for record in memory.replay(name):
                records.append(record)
                if len(records) == MAX_RECORDS:
                    break
            try:
                info = memory.sessions.info(name)
            except AirsspecError:
                info = None
            return records, info

        try:
            records, info = await _read(served, request, read)
        except AirsspecError as exc:
            return render("error.html", request, 404, message=public(served, str(exc)))
        items = timeline(records)
        return render(
            "session.html",
            request,
            session=name,
            items=items,
            info=info,
            span=span,
            truncated=len(records) == MAX_RECORDS,
        )

    async def page(request: Request) -> Response:
        """A PNG page of the visual tier (``knowledge/visual``), read through the gate: a
        page of a session the user may not read is answered as one that does not exist."""
        name, file = request.path_params["session"], request.path_params["file"]

        def read(memory: Any) -> bytes | None:
            found = [p.data for p in memory.pages(name) if p.file == file]
            return found[0] if found else None

        try:
            data = await _read(served, request, read)
        except AirsspecError as exc:
            return render("error.html", request, 404, message=public(served, str(exc)))
        if data is None:
            return render("error.html", request, 404, message=f"no page {file} of {name}")
        return Response(data, media_type="image/png")

    async def verify(request: Request) -> Response:
        report = await _read(served, request, lambda m: m.verify())
        return render("verify.html", request, report=report)

    async def learnings(request: Request) -> Response:
        found = await _read(served, request, lambda m: m.learnings.list())
        rows = sorted(found.learnings, key=lambda a: (a.status != "active", -a.priority, a.ts))
        return render("learnings.html", request, learnings=rows, conflicts=found.conflicts)

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        answer = None
        error = None
        if query:
            try:
                answer = await _read(served, request, lambda m: m.search(query, k=20, fresh=False))
            except AirsspecError as exc:
                error = public(served, str(exc))
        return render("search.html", request, query=query, answer=answer, error=error)

    return [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),  # a link of any page cannot sign out
        Route("/", sessions),
        Route("/sessions/{session}", session),
        Route("/sessions/{session}/visual/{file}", page),
        Route("/verify", verify),
        Route("/learnings", learnings),
        Route("/search", search),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _span(request: Request) -> tuple[int, int] | None:
    """The ``from``-``to`` seq range a link asks to mark (a summary's covered records)."""
    try:
        low, high = int(request.query_params["from"]), int(request.query_params["to"])
    except (KeyError, ValueError):
        return None
    return (low, high) if 1 <= low <= high else None


def same_origin(request: Request) -> bool:
    """Whether a browser sent ``request`` from a page of this server: its ``Origin`` is ours,
    or (a browser that sends no ``Origin``) it says ``Sec-Fetch-Site: same-origin``."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"
    return request.headers.get("sec-fetch-site") == "same-origin"


def signed_in(response: Response, token: str, request: Request) -> Response:
    """``response`` setting the viewer's cookie (HttpOnly, SameSite=Strict)."""
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure)
    return response

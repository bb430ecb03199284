"""The web viewer at ``/``: the memory for people, served by the same process as the API.

Pages: the sessions (filtered by user, agent, date and text, a page at a time, the newest
started first), one session's timeline (messages, thoughts, tool calls paired with their
results, errors marked, memory events as cards, reads of the memory folded into a count, each
compaction shown as its summary rendered as markdown with a link to exactly the records it
covers, and links to jump to each error and summary), analytics (the charts of ``report`` as
SVG, filtered like the sessions), verify (against an uploaded seal as well), learnings with their
evidence and what people did to each (confirmed, rejected, its text or scope edited by a form,
recorded with the signed-in user as the actor), memory files (``/memories``) with every version
and who wrote it, facts (current, at a past day, or with what superseded them, each linked to
the records it came from), forget receipts (whom, when, by whom, how many sessions and keys:
never what was forgotten; an admin's page, as the access gate decides), and search with
provenance. The
header's links are ``NAV``: a new page adds its entry there and its route in ``routes``.
Server-rendered Jinja2 templates with autoescaping on, so stored content is always shown as
text, never run (markdown with raw HTML off); a few lines of our own JavaScript, no build step,
no third-party script. Signing in sets an HttpOnly cookie holding a sign-in of this process
(``Served.sign_in``: a random handle, never the token, which every other port of the host would
be sent), only by the form of ``/login`` posted from this server's own origin (the ``Origin``
header equal to ours, or ``Sec-Fetch-Site: same-origin``): another page cannot sign a browser in
as someone else, and a token in a url is never taken. Signing out ends the sign-in. Every page
reads through the signed-in user's scoped memory, and no page or error shows a path of the
server's machine.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup, escape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from airsspec.errors import AirsspecError, NoSuchSessionError
from airsspec.memory import FACT_KINDS, MEMORY_SESSION
from airsspec.serve.api import problem, public
from airsspec.serve.charts import bar_chart
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
# The ``tools`` report's counts per session as well, so the analytics page totals them over the
# sessions its filter keeps (a read-only query of the analytics views, through ``Memory.sql``).
TOOLS_BY_SESSION = """SELECT session, tool, count(*) AS calls,
    count(*) FILTER (WHERE is_error) AS errors
    FROM tool_calls GROUP BY ALL ORDER BY session, tool"""
PAGE_SIZE = 50  # sessions on one page of the list
MAX_SEAL = 1 << 20  # the largest seal file the verify page takes
# CommonMark with raw HTML off: a summary's markup is shown, its HTML is text, and links with
# an unsafe scheme (javascript:, data: ...) are left as text by markdown-it's own check.
MARKDOWN = MarkdownIt("commonmark", {"html": False})


NAV: tuple[tuple[str, str], ...] = (
    ("/", "Sessions"),
    ("/analytics", "Analytics"),
    ("/search", "Search"),
    ("/learnings", "Learnings"),
    ("/memories", "Memory files"),
    ("/facts", "Facts"),
    ("/forgotten", "Forgotten"),
    ("/verify", "Verify"),
)
"""The viewer's pages in its header, in order: (path, label); a page is marked as the one
shown for its own path and the paths under it."""
ENV.globals["nav"] = NAV
LEARNING_SCOPES = ("session", "project", "global")  # what the edit form offers


def markdown(text: str | None) -> Markup:
    """``text`` (a summary the compactor wrote, or stored content) as safe HTML."""
    return Markup(MARKDOWN.render(text or ""))


def human_time(ts: str | None) -> Markup:
    """A record's time as a person reads it (to the minute, UTC), the exact one on hover."""
    if not ts:
        return Markup("")
    try:
        shown = datetime.fromisoformat(ts).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        shown = ts
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(escape(ts), shown)


ENV.filters["markdown"] = markdown
ENV.filters["when"] = human_time


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
        if record.type == "memory_accessed":  # reads of the memory: one count per run of them
            if items and items[-1]["type"] == "memory_accessed":
                items[-1]["count"] += 1
                continue
            item["count"] = 1
        if record.type == "observation" and data.get("action_id") in actions:
            actions[data["action_id"]]["result"] = data  # shown under its call
            continue
        if record.type == "action":
            actions[record.id] = item
        items.append(item)
    return items


def jumps(items: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The seqs a timeline's header links to: each error and each summary."""
    found: dict[str, list[int]] = {"errors": [], "summaries": []}
    for item in items:
        result = item["result"] or item["record"]
        if result.get("is_error"):
            found["errors"].append(item["seq"])
        if item["type"] == "compaction":
            found["summaries"].append(item["seq"])
    return found


def _page(request: Request) -> int:
    try:
        return max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        return 1


def _filters(request: Request) -> dict[str, str]:
    return {
        k: request.query_params.get(k, "").strip() for k in ("user", "agent", "from", "to", "text")
    }


def _listed(memory: Any) -> list[dict[str, Any]]:
    """The sessions a list shows: the workspace's own log (learnings, feedback) is none."""
    owners = memory.scopes.owners()
    return [
        _session_row(info, owners.get(info.session))
        for info in memory.sessions.list()
        if info.session != MEMORY_SESSION
    ]


def analytics_charts(memory: Any, sessions: set[str]) -> list[Any]:
    """The charts of ``report`` (tools, sessions, tokens) over ``sessions``."""
    per_tool: dict[str, list[float]] = defaultdict(lambda: [0, 0])
    for session, tool, calls, errors in memory.sql(TOOLS_BY_SESSION)[0].rows:
        if session in sessions:
            per_tool[tool][0] += calls - (errors or 0)
            per_tool[tool][1] += errors or 0
    rows = memory.report("sessions")
    by_session = [dict(zip(rows.columns, r, strict=True)) for r in rows.rows]
    by_session = [r for r in by_session if r["session"] in sessions]
    per_day: dict[str, float] = defaultdict(float)
    tokens = memory.report("tokens")
    for r in tokens.rows:
        row = dict(zip(tokens.columns, r, strict=True))
        if row["session"] in sessions:
            per_day[str(row["day"])] += row["tokens"] or 0
    calls = sorted(per_tool.items(), key=lambda kv: -sum(kv[1]))
    return [
        bar_chart("Tool calls", calls, ["succeeded", "failed"]),
        bar_chart(
            "Tool calls per session",
            [
                (r["session"], [r["tool_calls"] - (r["errors"] or 0), r["errors"] or 0])
                for r in by_session
                if r["tool_calls"]
            ],
            ["succeeded", "failed"],
        ),
        bar_chart(
            "Tokens per session",
            [(r["session"], [r["tokens"] or 0]) for r in by_session],
            ["tokens"],
        ),
        bar_chart("Tokens per day", [(d, [t]) for d, t in sorted(per_day.items())], ["tokens"]),
    ]


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
        return signed_in(RedirectResponse("/", 303), served.sign_in(token), request)

    async def logout(request: Request) -> Response:
        if not same_origin(request):  # as the sign-in: another page cannot sign a browser out
            return problem(403, "sign out from this server's own page")
        served.sign_out(request.cookies.get(COOKIE))  # a copy of the cookie ends with it
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE)
        return response

    async def sessions(request: Request) -> Response:
        filters = _filters(request)

        def read(memory: Any) -> tuple[list[dict[str, Any]], set[str] | None]:
            rows = _listed(memory)
            found = None
            if filters["text"]:
                hits = memory.search(filters["text"], k=100, fresh=False)["hits"]
                wanted = filters["text"].lower()  # semantic neighbours alone do not count
                found = {h["session"] for h in hits if h["session"] and wanted in h["text"].lower()}
            return rows, found

        rows, found = await _read(served, request, read)
        shown = [row for row in rows if _matches(row, filters, found)]
        # by when each started: later writes into an old session (extraction) never reorder
        shown.sort(key=lambda row: (row["first_ts"] or "", row["session"]), reverse=True)
        page = _page(request)
        pages = max(1, -(-len(shown) // PAGE_SIZE))
        return render(
            "sessions.html",
            request,
            rows=shown[(page - 1) * PAGE_SIZE : page * PAGE_SIZE],
            matched=len(shown),
            total=len(rows),
            filters=filters,
            page=min(page, pages),
            pages=pages,
            query={k: v for k, v in filters.items() if v},
        )

    async def analytics(request: Request) -> Response:
        filters = _filters(request)

        def read(memory: Any) -> list[Any]:
            rows = [row for row in _listed(memory) if _matches(row, filters, None)]
            return analytics_charts(memory, {row["session"] for row in rows})

        try:
            charts = await _read(served, request, read)
        except AirsspecError as exc:
            return render("error.html", request, 400, message=public(served, str(exc)))
        return render("analytics.html", request, charts=charts, filters=filters)

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
            jumps=jumps(items),
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
        if request.method == "GET":
            report = await _read(served, request, lambda m: m.verify())
            return render("verify.html", request, report=report, seal=None)
        if not same_origin(request):
            return problem(403, "verify a seal from this server's own page (/verify)")
        try:
            form = await request.form(max_part_size=MAX_SEAL)
        except HTTPException as exc:
            return problem(400, f"seal upload: {exc.detail}")
        upload = form.get("seal")
        if upload is None or isinstance(upload, str):
            return problem(400, "seal upload: choose a seal file (airsspec seal writes one)")
        body = await upload.read()
        try:
            report = await _read(served, request, lambda m: _verify_against(m, body))
        except AirsspecError as exc:
            message = public(served, str(exc))
            return render("error.html", request, 400, message=message, heading="Not verified")
        return render("verify.html", request, report=report, seal=upload.filename or "the seal")

    async def learnings(request: Request) -> Response:
        found = await _read(served, request, lambda m: m.learnings.list())
        rows = sorted(found.learnings, key=lambda a: (a.status != "active", -a.priority, a.ts))
        return render(
            "learnings.html",
            request,
            learnings=rows,
            conflicts=found.conflicts,
            scopes=LEARNING_SCOPES,
        )

    async def curate(request: Request) -> Response:
        """A learning confirmed, rejected (``verdict``) or edited (``edit``: its text and
        scope from the form, each left unchanged when it is), as the signed-in user."""
        if not same_origin(request):
            return problem(403, "change a learning from this server's own page (/learnings)")
        form = await request.form()
        doing = request.path_params["verdict"]
        learning = request.path_params["learning"]
        reason = str(form.get("reason", "")).strip()
        by = request.user.principal.user

        def change(memory: Any) -> Any:
            if doing != "edit":
                return memory.learnings.feedback(learning, doing, reason=reason, by=by)
            # a browser sends a textarea's line ends as CRLF, whatever was typed
            text = str(form.get("text", "")).replace("\r\n", "\n").strip() or None
            scope = str(form.get("scope", "")) or None
            return memory.learnings.edit(learning, text=text, scope=scope, reason=reason, by=by)

        try:
            await _read(served, request, change)
        except AirsspecError as exc:
            message = public(served, str(exc))
            return render(
                "error.html", request, exc.http_status, message=message, heading="Not done"
            )
        return RedirectResponse(f"/learnings#l-{learning}", 303)

    async def memories(request: Request) -> Response:
        """The signed-in user's ``/memories`` tree: each file's current version."""
        files = await _read(served, request, lambda m: m.files.tree())
        return render("memories.html", request, files=files)

    async def memory_file(request: Request) -> Response:
        """One memory file's versions, newest first: what it held, who wrote it, when."""
        path = request.query_params.get("path", "")

        try:
            versions = await _read(served, request, lambda m: m.files.history(path))
        except AirsspecError as exc:
            return render("error.html", request, 404, message=public(served, str(exc)))
        return render("memory_file.html", request, file=path, versions=versions[::-1])

    async def facts(request: Request) -> Response:
        """The facts this user may read (``Memory.facts``): current ones, or with ``history``
        the superseded too; ``as_of`` (a day: its end) shows them as they held then."""
        params = request.query_params
        query, kind = params.get("q", "").strip(), params.get("kind", "")
        history, day = params.get("history") == "1", params.get("as_of", "")
        filters = {"q": query, "kind": kind, "history": history, "as_of": day}  # as asked
        as_of = f"{day}T23:59:59.999999Z" if day else None
        found: dict[str, Any] = {"as_of": None, "facts": []}
        error = None
        try:
            found = await _read(
                served,
                request,
                lambda m: m.facts(
                    query or None, as_of=as_of, kinds=[kind] if kind else None, history=history
                ),
            )
        except AirsspecError as exc:
            error = public(served, str(exc))
        return render(
            "facts.html",
            request,
            facts=found["facts"][::-1] if not query else found["facts"],
            as_of=found["as_of"] if day else None,
            filters=filters,
            kinds=FACT_KINDS,
            error=error,
        )

    async def forgotten(request: Request) -> Response:
        """The receipts of ``forget``: the ``forgotten`` records of the workspace's own log
        (an admin's to read: the gate filters them out for a user). A workspace whose own log
        is not written yet, or not shown to this user, has none."""

        def read(memory: Any) -> list[Any]:
            try:
                return [r for r in memory.replay(MEMORY_SESSION) if r.type == "forgotten"]
            except NoSuchSessionError:
                return []

        receipts = await _read(served, request, read)
        return render("forgotten.html", request, receipts=receipts[::-1])

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
        Route("/analytics", analytics),
        Route("/verify", verify, methods=["GET", "POST"]),
        Route("/learnings", learnings),
        Route("/learnings/{learning}/{verdict:str}", curate, methods=["POST"]),
        Route("/memories", memories),
        Route("/memories/file", memory_file),
        Route("/facts", facts),
        Route("/forgotten", forgotten),
        Route("/search", search),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _verify_against(memory: Any, seal: bytes) -> Any:
    """``memory.verify`` against an uploaded seal, held in a file only for the call."""
    with tempfile.NamedTemporaryFile(suffix=".json") as held:
        held.write(seal)
        held.flush()
        return memory.verify(against=held.name)


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


def signed_in(response: Response, handle: str, request: Request) -> Response:
    """``response`` setting the viewer's cookie (HttpOnly, SameSite=Strict) to the sign-in
    ``handle``."""
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, handle, httponly=True, samesite="strict", secure=secure)
    return response

"""The HTTP API under ``/v1``: the operations of ``ops`` as JSON endpoints, and their OpenAPI.

A request body is the operation's arguments (``Op.arguments``: unknown keys refused); a path's
``{session}`` is one of them. Answers are JSON; a refusal is ``application/problem+json``
(RFC 9457) whose ``detail`` is the message the CLI prints after ``airsspec: error:``, with a
status by what the caller can do: 400 a bad request, 401 no valid token, 403 a read-only token
asked to write, 404 no such session, 409 busy or nothing to do. No traceback ever leaves the
server: an unexpected failure is logged and answered 500 without details.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from airsspec.errors import (
    AirsspecError,
    BadRequestError,
    InexactJSONError,
    ServerFilesError,
    validation_problem,
)
from airsspec.memory import loads_exact
from airsspec.serve.core import Served
from airsspec.serve.ops import OPS, Op

log = logging.getLogger("airsspec.serve")
PROBLEM = "application/problem+json"
MAX_BODY = 16 * 1024 * 1024  # bytes a request body may hold: more is refused, never buffered
SERVER_FILES = ("transcript_path", "agent_transcript_path")  # a hook payload's server paths


def problem(status: int, detail: str, title: str | None = None) -> Response:
    """An ``application/problem+json`` answer."""
    titles = {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        408: "Request Timeout",
        413: "Content Too Large",
    }
    body = {
        "type": "about:blank",
        "title": title or titles.get(status, "Conflict" if status == 409 else "Error"),
        "status": status,
        "detail": detail,
    }
    headers = {"WWW-Authenticate": 'Bearer realm="airsspec"'} if status == 401 else None
    return JSONResponse(body, status, headers=headers, media_type=PROBLEM)


async def read_json(request: Request) -> dict[str, Any]:
    """The request's JSON object (an empty body is ``{}``)."""
    raw = await request.body()  # at most MAX_BODY: the application's ``BodyLimit`` sees to it
    if not raw.strip():
        return {}
    try:  # as a JSONL line is read: what cannot be stored as given is refused, not changed
        data = loads_exact(raw, max_depth=None)  # each event's depth is checked where stored
    except InexactJSONError as exc:
        raise BadRequestError(f"request body: {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise BadRequestError(f"request body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequestError("request body is not a JSON object")
    return data


async def run(served: Served, request: Request, fn: Any, *, writes: bool) -> Any:
    """``fn(view)`` for the request's principal, in a worker thread."""
    principal = request.user.principal
    return await anyio.to_thread.run_sync(lambda: served.call(principal, fn, writes=writes))


def public(served: Served, detail: str) -> str:
    """``detail`` as a caller may see it: every path under the workspace (the CLI's messages
    name them, for the person at that machine) said as ``the workspace``; a caller learns
    nothing of the server's filesystem."""
    roots = {str(served.memory.root), str(Path(served.memory.root).resolve())}
    for root in sorted(roots, key=len, reverse=True):
        detail = re.sub(re.escape(root) + r"[^\s'\"]*", "the workspace", detail)
    return detail


def guarded(handler: Any, served: Served) -> Any:
    """``handler``'s answer, or the problem its error is."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ValidationError as exc:
            return problem(400, validation_problem(exc))
        except AirsspecError as exc:
            return problem(exc.http_status, public(served, str(exc)))
        except Exception:  # never a traceback to the caller; the server's log has it
            log.exception("unexpected failure on %s %s", request.method, request.url.path)
            return problem(500, "internal error (see the server's log)", "Internal Server Error")

    return endpoint


def _query(request: Request, op: Op) -> dict[str, Any]:
    """A GET's arguments from its query string: a list field takes every value given."""
    fields = op.arguments.model_fields
    data: dict[str, Any] = {}
    for name in request.query_params:
        values = request.query_params.getlist(name)
        many = name in fields and "list[" in str(fields[name].annotation)
        data[name] = values if many or len(values) > 1 else values[0]
    return data


def _op_endpoint(served: Served, op: Op) -> Any:
    async def handler(request: Request) -> Response:
        data = await read_json(request) if request.method == "POST" else _query(request, op)
        for name, value in request.path_params.items():
            if name in data and data[name] != value:
                raise BadRequestError(f"field {name!r}: {data[name]!r} differs from the path")
            data[name] = value
        arguments = op.arguments.model_validate(data)
        caller = request.user.principal.user

        def call(memory: Any) -> Any:
            return op.call(memory, arguments, caller)

        result = await run(served, request, call, writes=not op.read_only)
        return JSONResponse(result)

    return guarded(handler, served)


MAX_BUDGET = 1_000_000  # tokens a hook's answer may be asked for (as the context operation)


def _number(request: Request, name: str, default: int) -> int:
    try:
        value = int(request.query_params.get(name) or default)
    except ValueError as exc:
        raise BadRequestError(f"{name}: not a whole number") from exc
    if not 0 <= value <= MAX_BUDGET:
        raise BadRequestError(f"{name}: {value} is not between 0 and {MAX_BUDGET}")
    return value


def _hook_endpoint(served: Served) -> Any:
    async def handler(request: Request) -> Response:
        from airsspec import hooks

        payload = await read_json(request)
        event = request.path_params["event"]
        named = [key for key in SERVER_FILES if payload.get(key)]
        if named and not request.user.principal.local:
            raise ServerFilesError(
                f"hook input names a file of the server's machine ({', '.join(named)}): "
                "only the server's local token may (a token's user would read it through "
                "the server)"
            )
        budget, recall = _number(request, "budget", 2000), _number(request, "recall", 0)
        event = hooks.normalize(event, payload)
        principal = request.user.principal

        def defer(job: Any) -> None:  # the slow part runs after the answer, in the server
            served.later(principal, lambda m: hooks.run_job(m, job))

        answer = await run(
            served,
            request,
            lambda m: hooks.handle(
                m, event, payload, budget=budget, recall_budget=recall, defer=defer
            ),
            writes=True,
        )
        shown = "" if answer is None else json.dumps(answer, ensure_ascii=False) + "\n"
        return JSONResponse({"answer": answer, "stdout": shown})

    return guarded(handler, served)


async def health(request: Request) -> Response:
    """Liveness, open to anyone: says nothing about the memory's content."""
    return JSONResponse({"status": "ok", "pid": os.getpid()})


def openapi(served: Served) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API, generated from the operations' models."""
    schemas: dict[str, Any] = {
        "Problem": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("type", "title", "detail")}
            | {"status": {"type": "integer"}},
        }
    }
    paths: dict[str, Any] = {}
    errors = {
        str(code): {"description": text, "content": {PROBLEM: {"schema": {"$ref": ref}}}}
        for code, text, ref in [
            (400, "bad request", "#/components/schemas/Problem"),
            (401, "no valid token", "#/components/schemas/Problem"),
            (403, "read-only token", "#/components/schemas/Problem"),
            (404, "no such session", "#/components/schemas/Problem"),
            (409, "busy, or nothing to do", "#/components/schemas/Problem"),
        ]
    }
    for op in OPS:
        path = f"/v1{op.path}"
        in_path = [p for p in ("session",) if "{" + p + "}" in op.path]
        body = op.arguments.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(body.pop("$defs", {}))
        for name in in_path:
            body["properties"].pop(name, None)
            body["required"] = [r for r in body.get("required", []) if r != name]
        entry: dict[str, Any] = {
            "operationId": op.name,
            "summary": op.description.split(". ")[0],
            "description": op.description,
            "parameters": [
                {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                for n in in_path
            ],
            "responses": {
                "200": {"description": "the result", "content": {"application/json": {}}},
                **errors,
            },
            "x-read-only": op.read_only,
        }
        if op.method == "POST":
            schemas[op.arguments.__name__] = body
            ref = {"$ref": f"#/components/schemas/{op.arguments.__name__}"}
            entry["requestBody"] = {"content": {"application/json": {"schema": ref}}}
        paths.setdefault(path, {})[op.method.lower()] = entry
        if op.method != "GET" and "GET" in op.methods:  # the same read, its arguments in the query
            query = [
                {"name": n, "in": "query", "schema": schema}
                for n, schema in body["properties"].items()
            ]
            get = {k: v for k, v in entry.items() if k != "requestBody"}
            get["operationId"] = f"{op.name}_get"
            get["parameters"] = [*entry["parameters"], *query]
            paths[path]["get"] = get
    paths["/v1/hooks/{event}"] = {
        "post": {
            "operationId": "hook",
            "summary": "Run one Claude Code hook with its JSON input",
            "parameters": [{"name": "event", "in": "path", "required": True}],
            "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
            "responses": {"200": {"description": "the hook's answer"}, **errors},
        }
    }
    paths["/v1/health"] = {
        "get": {
            "operationId": "liveness",
            "summary": "Liveness (no token needed)",
            "security": [],
            "responses": {"200": {"description": "the server runs"}},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "airsspec memory", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def routes(served: Served) -> list[Route]:
    """Every route of the API."""
    document = openapi(served)

    async def openapi_endpoint(request: Request) -> Response:
        return JSONResponse(document)

    made = [
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/openapi.json", openapi_endpoint, methods=["GET"]),
        Route("/v1/hooks/{event}", _hook_endpoint(served), methods=["POST"]),
    ]
    made += [Route(f"/v1{op.path}", _op_endpoint(served, op), methods=op.methods) for op in OPS]
    return made

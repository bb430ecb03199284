"""The operations a served memory offers, declared once for the HTTP API and the MCP tools.

Each operation is a function ``(memory, **arguments) -> JSON``, declared by ``@reads`` or
``@writes`` with its HTTP method and path, whose keyword parameters carry their type, bounds and
description (``Annotated[..., Field(...)]``); the fields of a search are those of
``QueryMemoryInput``, those of a memory file's edits those of ``StrReplace`` and ``Insert``, and
the events of an append are the event models the log accepts, so no field is spelled twice. From
one declaration come the HTTP request body (``arguments``: a model refusing unknown keys), its
OpenAPI schema, and the MCP tool (name, description from the docstring, input schema,
``readOnlyHint``/``destructiveHint``). Validation of values the log itself checks (session ids,
event fields) is left to ``Memory``, so its messages are the CLI's. Every write appends to the
log, but for two destructive ones (``Op.destructive``): forgetting destroys keys, revoking a
token removes it. Who may call an operation on what is decided by the memory each call is given
(the access gate, ``memory.scopes``), never here; an operation that records who asked takes the
caller's name from the door (``Op.caller``), never from the request.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cached_property, partial
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, Union, overload

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, create_model

from airsspec.errors import InvalidEventError
from airsspec.memory import (
    CONTEXT_BUDGET,
    INPUT_TYPES,
    SYSTEM_TYPES,
    FactKind,
    LearningKind,
    LearningScope,
    QueryMemoryInput,
    Record,
    compact_answer,
    context_shares,
    elided_seqs,
    replay_lines,
)

# What a caller may append: the event models of the log, the system ones aside (derived; a
# type checker, which cannot run the catalog, sees their common base).
if TYPE_CHECKING:
    from airsspec.memory import Event as AppendableEvent
else:
    AppendableEvent = Annotated[
        Union[tuple(m for t, m in INPUT_TYPES.items() if t not in SYSTEM_TYPES)],  # noqa: UP007
        Field(discriminator="type"),
    ]

Session = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        description="session id: letters, digits, '.', '_' or '-', starting with a letter or digit",
    ),
]
Budget = Annotated[int, Field(ge=1, le=1_000_000, description="token budget of the context")]
Limit = Annotated[int, Field(ge=1, le=10_000, description="at most this many records")]
Phase = Annotated[str, Field(min_length=1, max_length=100, description="a configured phase")]


@overload
def _record(record: Record) -> dict[str, Any]: ...
@overload
def _record(record: Record | None) -> dict[str, Any] | None: ...
def _record(record: Record | None) -> dict[str, Any] | None:
    return None if record is None else record.model_dump(mode="json", exclude_none=True)


# ---------------------------------------------------------------------------- the declaration


@dataclass(frozen=True)
class Op:
    """One operation: its function, whether it writes, and where it lives in HTTP.
    ``records_access``: a read that appends a side record (``memory_accessed``: which
    learnings it gave) for a read-write caller, and nothing for a read-only one.
    ``destructive``: it destroys something (keys, a token), beyond appending to the log.
    ``caller``: the parameter the door fills with the caller's name (never a request field).
    ``model``: the declared model whose fields are its parameters (the function takes them as
    keywords), where they are declared once for more than this operation."""

    fn: Callable[..., Any]
    read_only: bool
    method: str
    path: str
    records_access: bool = False
    destructive: bool = False
    caller: str | None = None
    model: type[BaseModel] | None = None

    @property
    def methods(self) -> list[str]:
        """Its HTTP methods: a read with no side record is a GET as well (arguments in the
        query string, for curl and a browser), whatever its ``method``."""
        get = self.read_only and not self.records_access and self.method != "GET"
        return [self.method, "GET"] if get else [self.method]

    @property
    def name(self) -> str:
        """The tool name (and the OpenAPI operation id)."""
        return self.fn.__name__

    @property
    def description(self) -> str:
        """The function's docstring, one paragraph."""
        return " ".join((self.fn.__doc__ or "").split())

    @cached_property
    def parameters(self) -> list[inspect.Parameter]:
        """The keyword parameters (the memory aside), with their annotations resolved; an
        operation that takes a declared model's fields (``model``) takes exactly those, the
        required ones first, as a signature would list them."""
        if self.model is not None:
            fields = self.model.model_fields.items()
            return [
                inspect.Parameter(
                    name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=inspect.Parameter.empty if info.is_required() else info.default,
                    annotation=Annotated[info.annotation, info],
                )
                for name, info in sorted(fields, key=lambda field: not field[1].is_required())
            ]
        signature = inspect.signature(self.fn, eval_str=True)
        return [p for p in list(signature.parameters.values())[1:] if p.name != self.caller]

    @cached_property
    def arguments(self) -> type[BaseModel]:
        """The request model: these parameters, unknown keys refused."""
        fields: dict[str, Any] = {  # a parameter's annotation and default
            p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default)
            for p in self.parameters
        }
        name = "".join(part.title() for part in self.name.split("_")) + "Request"
        return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)

    def call(self, memory: Any, arguments: BaseModel, caller: str | None = None) -> Any:
        """Run on ``memory`` with validated ``arguments``, as ``caller`` (who calls: the
        token's user; None: the memory's own user, else the login name)."""
        values = {p.name: getattr(arguments, p.name) for p in self.parameters}
        if self.caller is not None:
            values[self.caller] = caller
        return self.fn(memory, **values)


_DECLARED: list[Op] = []
F = TypeVar("F", bound=Callable[..., Any])


def _declare(
    read_only: bool,
    method: str,
    path: str,
    *,
    records_access: bool = False,
    destructive: bool = False,
    caller: str | None = None,
    model: type[BaseModel] | None = None,
) -> Callable[[F], F]:
    def declare(fn: F) -> F:
        declared = Op(
            fn,
            read_only,
            method,
            path,
            records_access=records_access,
            destructive=destructive,
            caller=caller,
            model=model,
        )
        _DECLARED.append(declared)
        return fn

    return declare


reads = partial(_declare, True)
"""``@reads(method, path, ...)``: the function below is an operation that writes nothing but,
with ``records_access``, a side record (the options are ``Op``'s fields)."""
writes = partial(_declare, False)
"""``@writes(method, path, ...)``: the function below is an operation that writes."""


# ---------------------------------------------------------------------------- the operations


@writes("POST", "/sessions/{session}/events")
def append(
    memory: Any,
    session: Session,
    events: Annotated[
        list[SkipValidation[AppendableEvent]],  # a list, checked here; each event by the log
        Field(min_length=1, max_length=10_000, description="events to append, all or none"),
    ],
    after: Annotated[
        int | None,
        Field(
            ge=0,
            strict=True,  # a seq: ``true``, ``"1"`` or ``1.0`` is not one
            description="append only if the session's last record is this seq (0: none), "
            "else a conflict and nothing written",
        ),
    ] = None,
) -> dict[str, Any]:
    """Append events to a session's log, atomically (all or none). Each event is an object
    with a type: user/assistant/thought (content), action (tool, params), observation
    (result, action_id, is_error); optional id, ts and meta."""
    if not isinstance(events, list) or not events:
        raise InvalidEventError("events: give a list of one or more events")
    records = memory.append_many(session, events, after=after)
    return {
        "session": session,
        "appended": len(records),
        "seqs": [r.seq for r in records],
        "ids": [r.id for r in records],
        "hashes": [r.hash for r in records],
    }


@reads("POST", "/sessions/{session}/context", records_access=True)
def context(
    memory: Any,
    session: Session,
    budget: Budget = CONTEXT_BUDGET,
    query: Annotated[
        str | None, Field(max_length=10_000, description="recall passages for this first")
    ] = None,
    format: Annotated[
        Literal["text", "anthropic", "openai"],
        Field(description="text, or a messages list for the Anthropic or OpenAI SDK"),
    ] = "text",
    images: Annotated[
        bool,
        Field(description="with format anthropic: sessions moved to images as image blocks"),
    ] = False,
    thoughts: Annotated[
        bool, Field(description="keep the agent's thoughts in an API format's messages")
    ] = False,
) -> dict[str, Any]:
    """What a session should see next within ``budget`` tokens: its memory (task, phase,
    learnings), the facts the latest sessions left (open tasks, decisions, requirements), its
    latest summary and newest messages; with ``query``, recalled passages not already visible.
    A new session starts with what the latest other sessions left. ``parts`` gives each part's
    tokens and share of the budget (memory, facts, earlier, recalled, history). The newest
    message is never lost: ``truncated`` lists the messages shown cut (by seq). With ``images``
    (format anthropic), older sessions moved to the visual tier come as base64 PNG image
    blocks, counted at Claude's image-token rate within the budget. Answered as the CLI's
    ``context --json`` prints it: ``context`` (the text), or for the anthropic and openai
    formats ``messages`` (the list to pass as the SDK's messages; it is under ``context`` too
    until the next release, for callers of the older shape)."""
    made, parts = memory.context_parts(
        session, budget, query=query, format=format, images=images, thoughts=thoughts
    )
    answer = {
        "session": session,
        "budget": budget,
        "context": made,
        "truncated": elided_seqs(made),
        "parts": context_shares(parts, budget),
    }
    return answer if format == "text" else {**answer, "messages": made}


@reads("POST", "/search", model=QueryMemoryInput)
def query_memory(memory: Any, **request: Any) -> dict[str, Any]:
    """Search everything this agent has seen or done, including history compacted out of
    the context window: messages, tool calls and results, summaries, added documents.
    Returns the best passages, text first, each with session and seq range and score (with
    ``detail``, time, kind, ids and hashes too). Answers at once: records not indexed yet
    are searched in the log, and ``warnings`` says so."""
    detail = bool(request.pop("detail", False))
    return compact_answer(memory.search_now(**request), detail)


@reads("GET", "/sessions")
def sessions(memory: Any) -> list[dict[str, Any]]:
    """Every session: records, first and last time, bytes (and a problem, if unreadable)."""
    return [asdict(info) for info in memory.sessions.list()]


@reads("POST", "/sessions/{session}/replay")
def replay(
    memory: Any,
    session: Session,
    from_seq: Annotated[int, Field(ge=1, description="first seq to return")] = 1,
    until_seq: Annotated[int | None, Field(ge=1, description="last seq to return")] = None,
    limit: Limit = 200,
) -> list[dict[str, Any]]:
    """The records of a session as stored (at most ``limit``), from ``from_seq``."""
    out = []
    for record in memory.replay(session, from_seq=from_seq, until=until_seq):
        out.append(_record(record))
        if len(out) == limit:
            break
    return out


@reads("POST", "/learnings/query")
def learnings(
    memory: Any,
    reader: Annotated[
        Session | None, Field(description="the session reading (ranks by its task)")
    ] = None,
    cue: Annotated[str, Field(max_length=10_000, description="what is relevant now")] = "",
) -> dict[str, Any]:
    """Every learning (corrections, preferences, patterns, decisions, fixes, anchors) with its
    tier, status, priority and the evidence (session and seq) it came from, and open conflicts."""
    if reader is not None:
        memory.check_session(reader)
    found = memory.learnings.list(reader=reader, cue=cue)
    return {
        "now": found.now,
        "learnings": [a.to_json() for a in found.learnings],
        "conflicts": [c.to_json() for c in found.conflicts],
    }


@reads("POST", "/facts/query")
def facts(
    memory: Any,
    query: Annotated[
        str | None, Field(max_length=10_000, description="rank the facts by this text")
    ] = None,
    as_of: Annotated[
        str | None,
        Field(max_length=64, description="the facts as they held then (ISO time; default now)"),
    ] = None,
    kinds: Annotated[
        list[FactKind] | None, Field(max_length=6, description="only these kinds of fact")
    ] = None,
    history: Annotated[
        bool, Field(description="superseded facts too, each with until and superseded_by")
    ] = False,
    k: Annotated[int | None, Field(ge=1, le=10_000, description="at most this many")] = None,
) -> dict[str, Any]:
    """What earlier sessions decided, required, changed, fixed and left open, and facts about
    the user, as they held at ``as_of`` (default now): a fact superseded by a later one is
    left out, or with ``history`` kept with when it stopped holding (``until``) and the record
    that changed it (``superseded_by``). Each fact names the records (session, seq) it came
    from."""
    return memory.facts(query, as_of=as_of, kinds=kinds, history=history, k=k)


@writes("POST", "/learnings")
def add_learning(
    memory: Any,
    text: Annotated[str, Field(min_length=1, max_length=10_000, description="the learning")],
    kind: Annotated[LearningKind, Field(description="what kind of learning")] = "preference",
    scope: Annotated[LearningScope, Field(description="where it applies")] = "project",
    session: Annotated[
        str | None, Field(max_length=128, description="the session it is from")
    ] = None,
) -> dict[str, Any] | None:
    """Record a learning the user states directly (explicit, confirmed)."""
    return _record(memory.learnings.add(text, kind=kind, scope=scope, session=session))


@writes("POST", "/learnings/feedback", caller="by")
def learning_feedback(
    memory: Any,
    learning_id: Annotated[str, Field(min_length=1, max_length=200, description="id or prefix")],
    verdict: Annotated[Literal["confirmed", "rejected"], Field(description="the verdict")],
    reason: Annotated[str, Field(max_length=10_000, description="why")] = "",
    by: str | None = None,  # the caller (``Op.caller``)
) -> dict[str, Any] | None:
    """Confirm or reject a learning; a rejected one never reaches a prompt again. Recorded
    with who gave the verdict."""
    return _record(memory.learnings.feedback(learning_id, verdict, reason=reason, by=by))


@writes("POST", "/sessions/{session}/start")
def start_session(
    memory: Any,
    session: Session,
    task: Annotated[str | None, Field(max_length=10_000, description="what it is for")] = None,
    phase: Phase | None = None,
) -> dict[str, Any] | None:
    """Record that a session starts (created, or resumed) with its task and phase."""
    return _record(memory.sessions.start(session, task=task, phase=phase))


@writes("POST", "/sessions/{session}/phase")
def set_phase(
    memory: Any,
    session: Session,
    phase: Phase,
) -> dict[str, Any] | None:
    """Move a session to another configured phase."""
    return _record(memory.sessions.phase(session, phase))


@writes("POST", "/sessions/{session}/end")
def end_session(
    memory: Any,
    session: Session,
    status: Annotated[
        str, Field(min_length=1, max_length=100, description="how it ended")
    ] = "done",
) -> dict[str, Any] | None:
    """Record that a session ended; its learnings are extracted at once."""
    return _record(memory.sessions.end(session, status=status))


@writes("POST", "/sessions/{session}/assign")
def assign_session(
    memory: Any,
    session: Session,
    user: Annotated[str, Field(min_length=1, max_length=128, description="the new owner")],
) -> dict[str, Any] | None:
    """Give a session to a user (admins only): other users no longer read it. The change is
    recorded in the session's log."""
    return _record(memory.sessions.assign(session, user=user))


@writes("POST", "/sessions/{session}/compact")
def compact(
    memory: Any,
    session: Session,
    force: Annotated[bool, Field(description="compact even within budget")] = False,
) -> dict[str, Any]:
    """Compact a session's oldest history into a summary if its hot window is over budget
    (or ``force``); the summary is appended to the log, nothing is removed."""
    return {"session": session, "compaction": _record(memory.compact(session, force=force))}


@reads("POST", "/verify")
def verify(
    memory: Any,
    sessions: Annotated[
        list[str] | None, Field(max_length=10_000, description="sessions to check (default all)")
    ] = None,
) -> dict[str, Any]:
    """Check every record's schema, the seq continuity, the hash chains and the heads."""
    report = memory.verify(sessions)
    return {
        "ok": report.ok,
        "records": report.records,
        "sessions": [asdict(s) for s in report.sessions],
    }


@reads("GET", "/status")
def health(memory: Any) -> dict[str, Any]:
    """Every tier's lag and what is degraded, capacity of the learning tiers, open conflicts,
    and ``attention``: what needs a person (empty when all is well)."""
    return memory.learnings.health()


# ---------------------------------------------------------------- the CLI's reads, served
# What ``airsspec status`` and ``replay`` show, so the light client (``airsspec.client``) answers
# them through a running server with the full command's own output.


@reads("GET", "/overview")
def overview(memory: Any) -> dict[str, Any]:
    """The workspace at a glance, as ``airsspec status --json`` prints it: the log's sessions,
    records and bytes, every projection's items, size and lag, and what is degraded. Not the
    workspace's folder: no answer names a path of the server's machine (the light client,
    on that machine, fills in the folder it found)."""
    return {k: v for k, v in memory.overview().items() if k != "workspace"}


@reads("POST", "/sessions/{session}/transcript")
def transcript(
    memory: Any,
    session: Session,
    from_seq: Annotated[int, Field(ge=1, description="first seq to show")] = 1,
    until: Annotated[
        str | None, Field(max_length=64, description="last seq, or an RFC 3339 time, to show")
    ] = None,
    stored: Annotated[bool, Field(description="the stored lines, exactly, not the text")] = False,
    meta: Annotated[bool, Field(description="every record's meta in full")] = False,
    limit: Limit = 1000,
) -> dict[str, Any]:
    """A session as ``airsspec replay`` shows it: a line per record (its text, or with
    ``stored`` the record exactly as stored), at most ``limit`` from ``from_seq``; ``next``
    is the seq to ask for the rest from (None at the end)."""
    lines: list[str] = []
    pairs = memory.replay(session, until=until, raw=True, plain=True)
    for seq, line in replay_lines(pairs, from_seq, stored=stored, full_meta=meta):
        if len(lines) == limit:
            return {"lines": lines, "next": seq}
        lines.append(line)
    return {"lines": lines, "next": None}


# ---------------------------------------------------------------------------- memory files

MemoryPath = Annotated[
    str, Field(min_length=1, max_length=4096, description="a path under /memories")
]
Sha256 = Annotated[
    str | None,
    Field(
        pattern=r"^[0-9a-f]{64}$",
        description="the content_sha256 read: refused (409) if the file changed since",
    ),
]
Actor = Annotated[
    str | None, Field(max_length=200, description="who writes (a model, a tool), kept with it")
]
AsOf = Annotated[
    int | str | None,
    Field(description="as it stood then: a seq of the workspace's own log, or an RFC 3339 time"),
]


def _version(version: Any) -> dict[str, Any] | None:
    return None if version is None else asdict(version)


def _change(change: Any) -> dict[str, Any]:
    return {"result": change.message, "version": _version(change.version)}


@reads("POST", "/memories/view")
def memory_view(
    memory: Any,
    path: MemoryPath = "/memories",
    view_range: Annotated[
        list[int] | None,
        Field(min_length=2, max_length=2, description="first and last line (-1: the end)"),
    ] = None,
    as_of: AsOf = None,
) -> dict[str, Any]:
    """View a /memories folder (two levels deep) or a memory file's numbered lines, as
    Claude's memory tool answers ``view``; each file's current version with its
    content_sha256 in ``files``."""
    files = memory.files.tree(as_of=as_of)
    return {
        "result": memory.files.view(path, view_range, as_of=as_of),
        "files": {p: v.sha256 for p, v in files.items()},
    }


@reads("POST", "/memories/history")
def memory_history(memory: Any, path: MemoryPath) -> list[dict[str, Any] | None]:
    """Every version of a /memories path, oldest first: its text, content_sha256, the agent
    and actor that wrote it, and the log record (seq, hash, time) it is."""
    return [_version(v) for v in memory.files.history(path)]


@writes("POST", "/memories/create")
def memory_create(
    memory: Any,
    path: MemoryPath,
    file_text: Annotated[str, Field(max_length=10_000_000, description="the file's text")],
    actor: Actor = None,
) -> dict[str, Any]:
    """Create a memory file (refused, 409, if the path exists)."""
    return _change(memory.files.create(path, file_text, actor=actor))


class _Edit(BaseModel):
    """What an edit of a memory file names beside its own fields: the file, the version read
    (the edit is refused if the file changed since) and who writes."""

    path: MemoryPath
    content_sha256: Sha256 = None
    actor: Actor = None


class StrReplace(_Edit):
    """``memory_str_replace``'s arguments."""

    old_str: Annotated[str, Field(min_length=1, description="text found exactly once")]
    new_str: Annotated[str, Field(description="its replacement")]


class Insert(_Edit):
    """``memory_insert``'s arguments."""

    insert_line: Annotated[int, Field(ge=0, description="insert after this line (0: on top)")]
    insert_text: Annotated[str, Field(description="the text inserted")]


@writes("POST", "/memories/str_replace", model=StrReplace)
def memory_str_replace(memory: Any, **edit: Any) -> dict[str, Any]:
    """Replace the one occurrence of ``old_str`` in a memory file."""
    return _change(memory.files.str_replace(**edit))


@writes("POST", "/memories/insert", model=Insert)
def memory_insert(memory: Any, **edit: Any) -> dict[str, Any]:
    """Insert text after a line of a memory file."""
    return _change(memory.files.insert(**edit))


@writes("POST", "/memories/delete")
def memory_delete(
    memory: Any,
    path: MemoryPath,
    content_sha256: Sha256 = None,
    actor: Actor = None,
) -> dict[str, Any]:
    """Delete a memory file or folder from the tree (its history stays in the log)."""
    return _change(memory.files.delete(path, content_sha256=content_sha256, actor=actor))


@writes("POST", "/memories/rename")
def memory_rename(
    memory: Any,
    old_path: MemoryPath,
    new_path: MemoryPath,
    actor: Actor = None,
) -> dict[str, Any]:
    """Move a memory file or folder to a path that does not exist."""
    return _change(memory.files.rename(old_path, new_path, actor=actor))


# ---------------------------------------------------------------------------- curation and admin
# The people's operations: a learning edited, forgetting and the server's tokens. ``by`` is
# never an argument a caller gives: the door fills it with the caller's name (``Op.caller``).

Caller = str | None  # who calls (the token's user), filled by the door


@writes("POST", "/learnings/edit", caller="by")
def edit_learning(
    memory: Any,
    learning_id: Annotated[str, Field(min_length=1, max_length=200, description="id or prefix")],
    text: Annotated[
        str | None, Field(min_length=1, max_length=20_000, description="its new text")
    ] = None,
    scope: Annotated[LearningScope | None, Field(description="where it applies now")] = None,
    reason: Annotated[str, Field(max_length=10_000, description="why")] = "",
    by: Caller = None,
) -> dict[str, Any] | None:
    """Edit a learning's text or scope (only an admin makes one global). Recorded as an event
    with who made it; what was first recorded stays in the log."""
    return _record(memory.learnings.edit(learning_id, text=text, scope=scope, reason=reason, by=by))


@writes("POST", "/forget", destructive=True, caller="by")
def forget(
    memory: Any,
    user: Annotated[str | None, Field(max_length=128, description="forget this user")] = None,
    session: Annotated[str | None, Field(max_length=128, description="or this session")] = None,
    by: Caller = None,
) -> dict[str, Any]:
    """Forget a user or a session (admins only; needs [privacy] encrypt): destroy its keys,
    purge every derived copy and record who asked. Answered with the receipt: whom, which
    sessions, how many keys and records, what stays in the clear."""
    memory.scopes.guard_admin("forget through the server")
    return memory.forget(user=user, session=session, by=by).to_json()


def _token(entry: Any) -> dict[str, Any]:
    return {k: v for k, v in asdict(entry).items() if k != "sha256"}


@reads("GET", "/tokens")
def tokens(memory: Any) -> list[dict[str, Any]]:
    """The server's tokens (admins only): id, user, read-only, admin, created; never a token
    or its hash."""
    from airsspec.serve.tokens import TokenStore

    memory.scopes.guard_admin("list the server's tokens")
    return [_token(entry) for entry in TokenStore(memory.root).entries()]


@writes("POST", "/tokens")
def create_token(
    memory: Any,
    user: Annotated[str, Field(min_length=1, max_length=128, description="whose token")],
    read_only: Annotated[bool, Field(description="it may only read")] = False,
    admin: Annotated[bool, Field(description="it sees the whole workspace")] = False,
) -> dict[str, Any]:
    """Make a token (admins only). The token is in this answer only: the server keeps its
    hash."""
    from airsspec.serve.tokens import TokenStore

    memory.scopes.guard_admin("make a token")
    entry, token = TokenStore(memory.root).create(user, read_only=read_only, admin=admin)
    return {**_token(entry), "token": token}


@writes("POST", "/tokens/revoke", destructive=True)
def revoke_token(
    memory: Any,
    token_id: Annotated[
        str, Field(min_length=1, max_length=64, description="its id, or 6+ of its first characters")
    ],
) -> dict[str, Any]:
    """Revoke a token (admins only): its next request is refused. The last admin token is
    refused here (the host's ``airsspec token revoke`` can)."""
    from airsspec.serve.tokens import TokenStore

    memory.scopes.guard_admin("revoke a token")
    return _token(TokenStore(memory.root).revoke(token_id, keep_an_admin=True))


OPS: tuple[Op, ...] = tuple(_DECLARED)
"""Every operation, in the order declared; the HTTP API and the MCP tools are generated from
this tuple."""

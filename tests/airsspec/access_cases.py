"""The access matrix of a served memory, declared once: who (a principal) may do what (an
operation of ``airsspec.serve.ops.OPS``) to what (a target), through which door (HTTP, MCP).

A served workspace is built once (``build``): alice's and bob's sessions, a session written
with no user (the team's), each ended (so each holds a consolidation's facts), learnings of
each kind of owner in the workspace's own log, and a global learning. Every text a user writes
carries that user's canary, so a leak of one user's record into another user's answer is a
plain substring check. ``call`` runs one cell and
returns what the caller saw (``Outcome``); ``expected`` says what the declared matrix allows:

- ``none`` (no token): 401 everywhere;
- ``admin``: every operation on every target answered as the unscoped Python API answers it;
- ``user``/``other`` (read-write): their own session anything; another user's session exactly
  as a session that does not exist (404, never a hint that it does); the team's sessions read
  but not written (403); the workspace's own log read as the caller's own records only, never
  written (403); a global learning refused (403, admins only);
- ``read_only``: as ``user`` for reads, 403 for every write, and no read appends anything;
- memory files (``memory_*``): each caller has its own ``/memories`` tree (an admin's is the
  team's), so another's file, the team's to a user, is exactly a file that does not exist;
- a learning is edited as it is confirmed (``edit_learning`` as ``learning_feedback``);
- the admin operations (``ADMIN_OPS``: forget, the tokens) are an admin's alone: 403 to every
  other principal, the token file unchanged; an admin's forget is refused here as the unscoped
  API refuses it (the workspace keeps its content in the clear), a revoke takes a token made
  for the cell only.

The log's byte length (``log_size``) changes only where a write is allowed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx

from airsspec.serve.ops import OPS
from eventlog.schema import MEMORY_SESSION
from tests.support.tls import TLS

PRINCIPALS = ("admin", "user", "other", "read_only", "none")
TARGETS = ("own", "others", "unowned", "workspace", "global")
DOORS = ("http", "mcp")
OP_NAMES = tuple(op.name for op in OPS)
OP_BY_NAME = {op.name: op for op in OPS}

CANARY = {"alice": "ALICECANARY", "bob": "BOBCANARY", "team": "TEAMCANARY", "admin": "ADMINCANARY"}
SESSION = {"alice": "alice-s", "bob": "bob-s", "team": "team-s", "workspace": MEMORY_SESSION}
ABSENT = "absent-s"  # a session that never exists: what another user's must look like
ABSENT_LEARNING = "lrn-absent"
MEMORY_FILE = {
    "alice": "/memories/alice.md",
    "bob": "/memories/bob.md",
    "team": "/memories/team.md",
}
ABSENT_FILE = "/memories/absent.md"
USER_OF = {"admin": "owner", "user": "alice", "other": "bob", "read_only": "alice", "none": None}
SESSION_OPS = (
    "assign_session",
    "append",
    "context",
    "replay",
    "transcript",
    "start_session",
    "set_phase",
    "end_session",
    "compact",
)
WRITES = frozenset(op.name for op in OPS if not op.read_only)
ADMIN_OPS = ("forget", "tokens", "create_token", "revoke_token")
CURATION = ("learning_feedback", "edit_learning")  # a change to one learning, by its id
_EDITS = itertools.count()  # each edit gives a text not given before (a no-op is refused)


@dataclass
class World:
    """The served workspace: its url, the principals' tokens, the learnings' ids."""

    url: str
    log_dir: Path
    tokens: dict[str, str | None]
    learning: dict[str, str] = field(default_factory=dict)  # owner -> a learning id
    root: Path = Path()  # the workspace (its token file)


def token_ids(world: World) -> set[str]:
    """The ids of the server's tokens, as its token file holds them."""
    from airsspec.serve.tokens import TokenStore

    return {entry.id for entry in TokenStore(world.root).entries()}


def log_size(log_dir: Path) -> int:
    """The log's byte length: every ``*.jsonl`` under its folder."""
    return sum(p.stat().st_size for p in log_dir.rglob("*.jsonl"))


def build(memory: Any, url: str, local_token: str) -> World:
    """Write the workspace every cell runs on, through the Python API (see the module)."""
    from airsspec.serve.tokens import TokenStore

    store = TokenStore(memory.root)
    try:  # an admin token where they can be made; else the server's owner (unscoped)
        admin = store.create("root", admin=True)[1]
    except TypeError:
        admin = local_token
    tokens: dict[str, str | None] = {
        "admin": admin,
        "user": store.create("alice")[1],
        "other": store.create("bob")[1],
        "read_only": store.create("alice", read_only=True)[1],
        "none": None,
    }
    world = World(url, memory.log_dir, tokens, root=memory.root)
    for who in ("alice", "bob", "team"):
        view = memory if who == "team" else memory.scoped(user=who)
        canary = CANARY[who]
        session = SESSION[who]
        view.sessions.start(session, task=f"{canary} task: canary plan")
        view.append_many(
            session,
            [
                {"type": "user", "content": f"{canary} secret canary plan of {who}"},
                {"type": "assistant", "content": f"{canary} answer: canary plan noted"},
                {"type": "user", "content": f"The {canary} canary plan must be signed."},
            ],
        )
        view.sessions.end(session)  # its consolidation records the requirement as a fact
        learned = view.learnings.add(f"{canary} learning: canary plan", scope="project")
        world.learning[who] = learned.learning_id if hasattr(learned, "learning_id") else learned.id
        view.context(session, 4000, query=f"{canary} query canary plan")  # its access record
        if who != "team":
            view.learnings.feedback(world.learning[who], "confirmed", reason=f"{canary} reason")
        view.files.create(MEMORY_FILE[who], f"{canary} memory file of {who}\n", actor=canary)
    glob = memory.learnings.add(f"{CANARY['team']} global canary plan", scope="global")
    world.learning["global"] = glob.learning_id if hasattr(glob, "learning_id") else glob.id
    return world


# ---------------------------------------------------------------------------- one cell


def subject(principal: str) -> str:
    """Whose records a principal is (the admin stands for alice's side: her session is its own)."""
    return {"admin": "alice", "user": "alice", "read_only": "alice", "other": "bob"}.get(
        principal, "alice"
    )


def foreign(principal: str) -> str:
    """The other user, whose records this principal must never see."""
    return "bob" if subject(principal) == "alice" else "alice"


def target_session(principal: str, target: str) -> str | None:
    """The session a cell names (None: the target names no session)."""
    return {
        "own": SESSION[subject(principal)],
        "others": SESSION[foreign(principal)],
        "unowned": SESSION["team"],
        "workspace": MEMORY_SESSION,
        "global": None,
    }[target]


def target_learning(world: World, principal: str, target: str) -> str:
    """The learning a cell names."""
    return {
        "own": world.learning[subject(principal)],
        "others": world.learning[foreign(principal)],
        "unowned": world.learning["team"],
        "workspace": world.learning["team"],
        "global": world.learning["global"],
    }[target]


def memory_file(principal: str, target: str) -> str:
    """The /memories path a cell names: the caller's own file (an admin's tree is the
    team's), the other user's, or the team's."""
    tree = "team" if principal == "admin" else subject(principal)
    return {
        "own": MEMORY_FILE[tree],
        "others": MEMORY_FILE[foreign(principal)],
    }.get(target, MEMORY_FILE["team"])


def memory_arguments(op: str, principal: str, target: str, absent: bool) -> dict:
    """The arguments of a memory-file cell, chosen so that no cell changes what another one
    finds: an edit replaces the owner's canary by itself, a delete names a stale
    ``content_sha256``, a rename names its own path as the destination, a create writes
    under ``created/``."""
    path = ABSENT_FILE if absent else memory_file(principal, target)
    tree = "team" if path == MEMORY_FILE["team"] else path.rsplit("/", 1)[1][:-3]
    canary = CANARY.get(tree, "absent")
    return {
        "memory_view": {"path": path},
        "memory_history": {"path": path},
        "memory_create": {
            "path": path.replace("/memories/", "/memories/created/"),
            "file_text": "x",
        },
        "memory_str_replace": {"path": path, "old_str": canary, "new_str": canary},
        "memory_insert": {"path": path, "insert_line": 0, "insert_text": "another line"},
        "memory_delete": {"path": path, "content_sha256": "0" * 64},
        "memory_rename": {"old_path": path, "new_path": path},
    }[op]


def memory_expected(op: str, principal: str, target: str) -> str | None:
    """``expected`` of a memory-file cell: the caller's own file answered; another's (the
    team's, to a user) exactly as one that does not exist; create, delete and rename (always
    refused on one's own file here, a create done once) left to the invariants."""
    if principal == "read_only" and op in WRITES:
        return "forbidden"
    own = target == "own" or (principal == "admin" and target != "others")
    if not own:
        return None if op == "memory_create" else "absent"
    return None if op in ("memory_create", "memory_delete", "memory_rename") else "ok"


def applies(op: str, target: str) -> bool:
    """Whether a target means anything for an operation (a session operation needs one)."""
    return not (op in SESSION_OPS and target == "global")


def arguments(world: World, op: str, principal: str, target: str, *, absent: bool = False) -> dict:
    """The arguments of one cell; ``absent``: the same call naming what never existed."""
    if op.startswith("memory_"):
        return memory_arguments(op, principal, target, absent)
    session = ABSENT if absent else target_session(principal, target)
    canary = CANARY["admin" if principal == "admin" else subject(principal)]
    if op == "append":
        return {"session": session, "events": [{"type": "user", "content": f"{canary} more"}]}
    if op == "context":
        return {"session": session, "budget": 4000, "query": f"{canary} canary plan"}
    if op == "query_memory":
        return {"query": "canary plan", "k": 5} | ({"session": session} if session else {})
    if op in ("replay", "transcript"):
        return {"session": session, "limit": 10_000}
    if op == "learnings":
        return {"cue": "canary plan"} | ({"reader": session} if session else {})
    if op == "facts":
        return {"query": "canary plan", "history": True}
    if op == "add_learning":
        scope = "global" if target == "global" else "project"
        named = session if target in ("own", "others", "unowned") else None  # the evidence
        # A global learning reaches every reader: one a user should not have been able to add
        # must not carry that user's canary into the cells after it (its own cell fails).
        text = "a global rule added" if scope == "global" else f"{canary} added"
        return {"text": text, "scope": scope} | ({"session": named} if named else {})
    if op in CURATION:
        learning = ABSENT_LEARNING if absent else target_learning(world, principal, target)
        if op == "edit_learning":
            return {"learning_id": learning, "text": f"{canary} edited plan {next(_EDITS)}"}
        return {"learning_id": learning, "verdict": "confirmed", "reason": f"{canary} why"}
    if op == "forget":
        return {"session": session} if session else {"user": foreign(principal)}
    if op == "create_token":
        return {"user": "carol", "read_only": True}
    if op == "revoke_token":  # a token made for this cell alone
        from airsspec.serve.tokens import TokenStore

        return {"token_id": TokenStore(world.root).create("carol")[0].id}
    if op == "start_session":
        return {"session": session, "task": f"{canary} task"}
    if op == "set_phase":
        return {"session": session, "phase": "discover"}
    if op in ("end_session", "compact"):
        return {"session": session}
    if op == "assign_session":  # to its owner again: the cells after it see the same world
        owner = {"own": subject(principal), "others": foreign(principal)}.get(target, "carol")
        return {"session": session, "user": owner}
    if op == "verify":
        return {"sessions": [session]} if session else {}
    return {}  # sessions, health


@dataclass(frozen=True)
class Outcome:
    """What a caller saw: a status (MCP: 200, or the refusal's status when it is known from
    the HTTP door, else 0 for a tool error), and the answer's text."""

    status: int
    text: str

    @property
    def ok(self) -> bool:
        """Answered, not refused."""
        return 200 <= self.status < 300


def call(world: World, door: str, op: str, principal: str, args: dict) -> Outcome:
    """Run one operation through one door as one principal."""
    token = world.tokens[principal]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=world.url, headers=headers, timeout=120, verify=TLS) as http:
        if door == "http":
            spec = OP_BY_NAME[op]
            body = dict(args)
            path = spec.path
            if "{session}" in path:
                path = path.replace("{session}", body.pop("session"))
            if spec.method == "GET":
                answer = http.get(f"/v1{path}")
            else:
                answer = http.post(f"/v1{path}", json=body)
            return Outcome(answer.status_code, answer.text)
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": op, "arguments": args},
        }
        answer = http.post(
            "/mcp", json=request, headers={"Accept": "application/json, text/event-stream"}
        )
        if answer.status_code != 200:
            return Outcome(answer.status_code, answer.text)
        result = answer.json().get("result") or {}
        text = json.dumps(answer.json(), ensure_ascii=False)
        return Outcome(0 if result.get("isError") or "error" in answer.json() else 200, text)


# ---------------------------------------------------------------------------- the matrix

READS = frozenset(op.name for op in OPS if op.read_only)
SESSION_WRITES = ("append", "start_session", "set_phase", "end_session", "compact")
CREATES = ("append", "start_session")  # on a session that does not exist: it is made


def expected(op: str, principal: str, target: str) -> str | None:
    """What the declared matrix says of one cell: ``ok``, ``unauthorized`` (401),
    ``forbidden`` (403), ``refused`` (400 or 403: the unscoped API refuses it too),
    ``absent`` (exactly as the same call naming what never existed), ``hidden`` (refused,
    saying nothing of whose it is: a session that does not exist would be made), or None (the
    matrix leaves it open: only the invariants hold)."""
    if principal == "none":
        return "unauthorized"
    if op in ADMIN_OPS:
        return ("refused" if op == "forget" else "ok") if principal == "admin" else "forbidden"
    if op.startswith("memory_"):
        return memory_expected(op, principal, target)
    if principal == "admin":
        reserved = target == "workspace" and op in (*SESSION_WRITES, "assign_session")
        return "refused" if reserved else "ok"  # the workspace's log takes no direct write
    if principal == "read_only" and op in WRITES:
        return "forbidden"
    if op == "assign_session":
        return "forbidden"  # an admin's alone, whatever the session
    if target == "own" or op in ("sessions", "health"):
        return "ok"
    if target == "others":
        if op in CREATES or op == "context":  # a context of a new session is answered
            return "hidden"
        return "absent"
    if target == "unowned":
        if op in READS:
            return "ok"
        return "forbidden" if op in SESSION_WRITES else None
    if target == "workspace":
        if op in READS or op == "add_learning":
            return "ok"
        return "refused" if op in SESSION_WRITES else None
    # global
    if op == "add_learning":
        return "forbidden"
    return "ok" if op in READS else None


def may_write(op: str, principal: str, outcome: Outcome) -> bool:
    """Whether the log may grow by this cell: an answered write, or an answered read of a
    read-write caller (its access record); never a refusal, never a read-only caller."""
    return outcome.ok and principal not in ("read_only", "none")


def cells() -> list[tuple[str, str, str, str]]:
    """Every (op, door, principal, target) the matrix covers."""
    return [
        (op, door, principal, target)
        for op in OP_NAMES
        for door in DOORS
        for principal in PRINCIPALS
        for target in TARGETS
        if applies(op, target)
        # an admin's assignment of the team's session would change the world of later cells
        and not (op == "assign_session" and principal == "admin" and target == "unowned")
    ]


def _records(outcome: Outcome, door: str) -> list[dict[str, Any]]:
    """The records a replay answered (MCP: its tool result's structured content)."""
    answer = json.loads(outcome.text)
    if door == "http":
        return answer
    result = answer["result"]
    structured = result.get("structuredContent")
    if structured is not None:
        return structured.get("result", structured)
    return [json.loads(item["text"]) for item in result["content"]]


def _detail(outcome: Outcome, door: str, names: tuple[str, ...]) -> tuple[int, str]:
    """An answer as (status, message) with the names asked for replaced by one placeholder."""
    text = outcome.text
    if door == "http":
        with contextlib.suppress(ValueError, AttributeError):
            text = json.loads(text).get("detail", text)
    else:
        with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
            text = json.loads(text)["result"]["content"][0]["text"]
    for name in names:
        text = text.replace(name, "<NAME>")
    return outcome.status, text


def check(world: World, op: str, door: str, principal: str, target: str) -> None:
    """Run one cell and assert the matrix and the invariants (see the module)."""
    args = arguments(world, op, principal, target)
    before, tokens_before = log_size(world.log_dir), token_ids(world)
    outcome = call(world, door, op, principal, args)
    grown = log_size(world.log_dir) - before
    where = f"{op} via {door} as {principal} on {target}: {outcome.status} {outcome.text[:300]}"
    assert outcome.status < 500 and "Traceback" not in outcome.text, where
    tokens_after = token_ids(world)
    if op == "revoke_token":
        assert (args["token_id"] in tokens_after) != outcome.ok, where
    elif op == "create_token":
        assert len(tokens_after - tokens_before) == (1 if outcome.ok else 0), where
    else:
        assert tokens_after == tokens_before, where
    assert grown == 0 or may_write(op, principal, outcome), f"log grew by {grown}: {where}"
    if principal in ("user", "other", "read_only"):
        hidden = CANARY[foreign(principal)]
        assert hidden not in outcome.text, f"{hidden} leaked: {where}"
    want = expected(op, principal, target)
    refused = outcome.status in (0, 400, 403, 404, 409) and not outcome.ok
    if want == "unauthorized":
        assert outcome.status == 401, where
    elif want == "ok":
        assert outcome.ok, where
        if op == "replay" and target == "workspace" and principal in ("user", "other", "read_only"):
            users = {r.get("user") for r in _records(outcome, door)} - {None}
            assert users <= {subject(principal)}, f"records of {users}: {where}"
        if op == "facts":  # the caller's own facts and the team's, never another's (above)
            assert CANARY[subject(principal)] in outcome.text, where
            assert CANARY["team"] in outcome.text, where
        if op == "sessions" and principal != "admin" and target in ("others", "unowned"):
            listed = outcome.text
            if target == "others":
                assert f'"{SESSION[foreign(principal)]}' not in listed, where
            else:  # the team's sessions are every user's to read
                assert SESSION["team"] in listed, where
    elif want == "forbidden":
        assert outcome.status in ((0,) if door == "mcp" else (403,)), where
    elif want == "refused":
        assert outcome.status in ((0,) if door == "mcp" else (400, 403)), where
    elif want == "hidden":
        assert refused, where
        assert foreign(principal) not in _detail(outcome, door, (args["session"],))[1], (
            f"owner named: {where}"
        )
    elif want == "absent":
        absent_args = arguments(world, op, principal, target, absent=True)
        size = log_size(world.log_dir)
        ghost = call(world, door, op, principal, absent_args)
        wrote = log_size(world.log_dir) != size
        assert not wrote or may_write(op, principal, ghost), f"the absent call wrote: {where}"
        assert not (world.log_dir / f"{ABSENT}.jsonl").exists(), f"made {ABSENT}: {where}"
        if op in CURATION:
            names = (target_learning(world, principal, target), ABSENT_LEARNING)
        elif op.startswith("memory_"):
            names = (memory_file(principal, target), ABSENT_FILE)
        else:
            names = (SESSION[foreign(principal)], ABSENT)
        assert _detail(outcome, door, names) == _detail(ghost, door, names), (
            f"{where}\n  a session that does not exist: {ghost.status} {ghost.text[:300]}"
        )

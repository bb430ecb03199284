"""``airsspec serve`` over HTTP against a tenant with a token, beyond ``test_serve_http_hostile``:
bob, holding his own user token, learns nothing of alice's activity from ``/v1/status`` and
``/v1/overview`` (her damaged state, her records waiting to be projected, her projected ones),
reaches nothing of hers through her session id spelled around the gate on the write routes, and
a body a parser may choke on is a clear refusal by the MCP door as by the API, the log
byte-identical."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from airsspec.memory import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from airsspec.serve.tokens import TokenStore
from tests.support.tls import TLS

SECRET = "ALICESECRET the merger plan"
ALICE_SESSION = "alice-s"


class World:
    """A served workspace holding alice's session and bob's, with a token for each."""

    def __init__(self, memory: Memory, url: str) -> None:
        self.memory = memory
        self.url = url
        store = TokenStore(memory.root)
        self.tokens = {who: store.create(who)[1] for who in ("alice", "bob")}

    def client(self, who: str, **headers: str) -> httpx.Client:
        headers["Authorization"] = f"Bearer {self.tokens[who]}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=120, verify=TLS)

    def log_bytes(self) -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in sorted(self.memory.log_dir.rglob("*.jsonl"))}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path / "ws", create=True) as memory:
        memory.scoped(user="alice").append_many(
            ALICE_SESSION, [{"type": "user", "content": SECRET}]
        )
        memory.scoped(user="bob").append_many("bob-s", [{"type": "user", "content": "bob's note"}])
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            yield World(memory, where["url"])


def test_her_activity_changes_nothing_another_user_is_told(world: World) -> None:
    world.memory.project()
    with world.client("bob") as bob:
        before = {path: bob.get(path).json() for path in ("/v1/overview", "/v1/status")}
        alice = world.memory.scoped(user="alice")
        alice.append_many(ALICE_SESSION, [{"type": "user", "content": f"{SECRET} 1"}])
        world.memory.project()  # her projected records: the tiers' items and bytes
        alice.append_many(ALICE_SESSION, [{"type": "user", "content": f"{SECRET} 2"}])
        state = world.memory.workspace.layout.tier_dir("hot") / f"{ALICE_SESSION}.json"
        state.write_bytes(state.read_bytes() + b" ")  # her output changed after it was written
        for path, was in before.items():
            answer = bob.get(path)
            assert answer.status_code == 200, answer.text
            assert ALICE_SESSION not in answer.text, (path, answer.text)
            now = answer.json()
            if path == "/v1/status":  # its clock moves on
                now, was = {**now, "now": None}, {**was, "now": None}
            assert now == was, path
    with world.client("alice") as alice_http:
        assert ALICE_SESSION in alice_http.get("/v1/status").text  # she is told of her own


# Her session id spelled around the gate: encoded dots and slashes, a NUL, a prefix, her id
# with a file suffix, a Cyrillic look-alike, an overlong one.
SPELLINGS = (
    "alice-s%2F..",
    "..%2Falice-s",
    "%2e%2e%2falice-s",
    "bob-s%2F..%2Falice-s",
    "%2e%2e",
    "alice-s%00",
    "alice",
    "alice-",
    "ALICE-S",
    "alice-s.",
    "alice-s%2Ejsonl",
    "alice-s%20",
    "%D0%B0lice-s",
    "a" * 200,
)


@pytest.mark.parametrize("spelled", SPELLINGS)
def test_her_session_spelled_any_way_reaches_nothing_of_hers(world: World, spelled: str) -> None:
    before = world.log_bytes()
    with world.client("bob") as bob:
        answers = [
            bob.post(f"/v1/sessions/{spelled}/{route}", json={})
            for route in ("replay", "transcript", "events", "end", "compact")
        ]
        answers += [bob.get(f"/sessions/{spelled}"), bob.get(f"/sessions/{spelled}/visual/1.png")]
    for answer in answers:
        said = f"{answer.request.url}: {answer.status_code} {answer.text[:300]}"
        assert 400 <= answer.status_code < 500, said
        assert SECRET not in answer.text and "Traceback" not in answer.text, said
        assert str(world.memory.root) not in answer.text, said
    assert world.log_bytes() == before


# Bodies a tenant may send to a write: not JSON, not UTF-8, a lone surrogate, too deep for the
# parser, nested past the log's limit, a number past Python's, NaN, a key given twice, a flag
# given as a word, not an object, another session's record types, a field naming another user.
EVENTS = "/v1/sessions/bob-s/events"
BODIES = {
    "not JSON": b"{'events': []}",
    "not UTF-8": b'{"events":[{"type":"user","content":"\xff\xfe"}]}',
    "lone surrogate": b'{"events":[{"type":"user","content":"\\ud800"}]}',
    "too deep": b"[" * 100_000 + b"]" * 100_000,
    "meta too deep": (
        b'{"events":[{"type":"user","content":"x","meta":'
        + b'{"a":' * 200
        + b"1"
        + b"}" * 200
        + b"}]}"
    ),
    "huge integer": b'{"events":[{"type":"user","content":"x","meta":{"n":' + b"9" * 5000 + b"}}]}",
    "NaN": b'{"events":[{"type":"user","content":"x","meta":{"n":NaN}}]}',
    "a key twice": b'{"events":[{"type":"user","content":"x","content":"y"}]}',
    "a flag that is no bool": b'{"events":[{"type":"observation","result":1,"is_error":"yes"}]}',
    "null": b"null",
    "a list": b'[{"type":"user","content":"x"}]',
    "a system event": b'{"events":[{"type":"session_assigned","user":"bob"}]}',
    "a user field": b'{"events":[{"type":"user","content":"x","user":"alice"}]}',
    "a seq field": b'{"events":[{"type":"user","content":"x","seq":1}]}',
}


@pytest.mark.parametrize("name", BODIES)
def test_an_odd_body_is_a_clear_4xx_and_changes_nothing(world: World, name: str) -> None:
    before = world.log_bytes()
    headers = {"Content-Type": "application/json"}
    with world.client("bob") as bob:
        answers = [
            bob.post(path, content=BODIES[name], headers=headers) for path in (EVENTS, "/mcp")
        ]
    for answer in answers:
        said = f"{answer.request.url}: {answer.status_code} {answer.text[:300]}"
        assert 400 <= answer.status_code < 500 or answer.json().get("error"), said
        assert "Traceback" not in answer.text and str(world.memory.root) not in answer.text, said
    assert world.log_bytes() == before, name


# A name that would read as another in the viewer and in the records an admin reads: a
# right-to-left override (``gpj.md`` shown as ``dm.jpg``), an isolate, a line separator, a C1
# control (NEL); a space (or a no-break space) at either end of a file's or a folder's name.
MISLEADING = (
    ("/memories/\u202egpj.md", "control character"),
    ("/memories/a\u2067b.md", "control character"),
    ("/memories/a\u2028b.md", "control character"),
    ("/memories/a\x85b.md", "control character"),
    ("/memories/notes.md ", "begins or ends with a space"),
    ("/memories/ notes.md", "begins or ends with a space"),
    ("/memories/plans /a.md", "begins or ends with a space"),
    ("/memories/a.md\u00a0", "begins or ends with a space"),
    ("/memories/a.md\u200b", "begins or ends with a space"),  # a zero-width space
    ("/memories/\ufeffa.md", "begins or ends with a space"),  # a zero-width no-break space
    ("/memories/a\u2060/b.md", "begins or ends with a space"),  # a word joiner
)


@pytest.mark.parametrize(("name", "reason"), MISLEADING)
def test_a_memory_file_name_that_reads_as_another_is_refused(
    world: World, name: str, reason: str
) -> None:
    before = world.log_bytes()
    with world.client("bob") as bob:
        made = bob.post("/v1/memories/create", json={"path": name, "file_text": "x"})
        assert made.status_code == 400 and reason in made.json()["detail"], made.text
        assert bob.post(
            "/v1/memories/create", json={"path": "/memories/é👩‍💻.md", "file_text": "x"}
        ).is_success
        moved = bob.post(
            "/v1/memories/rename", json={"old_path": "/memories/é👩‍💻.md", "new_path": name}
        )
        assert moved.status_code == 400, moved.text
        assert bob.post("/v1/memories/view", json={"path": "/memories/é👩‍💻.md"}).is_success
    grown = {p for p, data in world.log_bytes().items() if before.get(p) != data}
    assert len(grown) == 1  # the workspace's own log, by the one create that was allowed


@pytest.mark.parametrize(("name", "reason"), MISLEADING)
def test_a_memory_file_written_whole_under_a_name_that_reads_as_another_is_refused(
    world: World, name: str, reason: str
) -> None:
    """The Python API's whole-file write, which creates a missing file, refuses the names a
    create refuses, and changes nothing."""
    from airsspec.errors import MemoryFileError

    before = world.log_bytes()
    with pytest.raises(MemoryFileError, match=reason):
        world.memory.files.write(name, "x")
    assert world.log_bytes() == before

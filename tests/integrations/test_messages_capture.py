"""Messages API capture: what Claude was sent, compaction blocks and applied edits included, kept
on the log and rebuilt byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from anthropic import Anthropic

from airsspec.errors import InvalidEventError, NoSuchSessionError
from airsspec.integrations.messages_capture import CapturedMessages, import_exchanges
from airsspec.memory import Memory
from tests.conftest import init_encrypted, init_workspace, snapshot

RECORDED = json.loads(
    (Path(__file__).parents[1] / "fixtures/anthropic/compaction_turns.json").read_text("utf-8")
)


class Replay:
    """The Messages API in a transport: answers with the recorded responses, keeping the bytes
    of every request sent."""

    def __init__(self, responses: list[dict]) -> None:
        self.responses = list(responses)
        self.sent: list[bytes] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request.content)
        return httpx2.Response(200, json=self.responses.pop(0))


def _converse(memory: Memory, session: str) -> Replay:
    """Three turns through the wrapper, the history kept as an SDK user keeps it: each reply's
    ``content`` (the SDK's models, the compaction block among them) sent back as it came."""
    replay = Replay(RECORDED["responses"])
    client = Anthropic(
        api_key="test-key", http_client=httpx2.Client(transport=httpx2.MockTransport(replay))
    )
    messages = CapturedMessages(client.beta.messages, memory, session)
    history: list[dict] = []
    for text in RECORDED["turns"]:
        history.append({"role": "user", "content": text})
        reply = messages.create(
            model="claude-sonnet-5-5",
            max_tokens=1024,
            messages=history,
            betas=RECORDED["betas"],
            context_management=RECORDED["context_management"],
        )
        history.append({"role": "assistant", "content": reply.content})
    return replay


def test_a_conversation_with_server_side_compaction_round_trips_byte_for_byte(
    tmp_path: Path,
) -> None:
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as memory:
        replay = _converse(memory, "chat")
        assert len(replay.sent) == 3
        for n, sent in enumerate(replay.sent, 1):
            assert memory.captures.request("chat", n) == sent
        requests = [r for r in memory.replay("chat") if r.type == "messages_request"]
        # each request keeps only what is new: the new user turn, and the assistant's last turn
        # as the SDK encodes it (its models' field order, not the response's): never the
        # whole history again
        assert [(r.reused, len(r.added)) for r in requests] == [(0, 1), (1, 2), (3, 2)]
        responses = [r for r in memory.replay("chat") if r.type == "messages_response"]
        assert [(r.compacted, r.applied_edits) for r in responses] == [
            (False, 0),
            (True, 1),
            (False, 0),
        ]
        compaction = json.loads(responses[1].body)["content"][0]
        recorded = RECORDED["responses"][1]["content"][0]
        assert compaction["encrypted_content"] == recorded["encrypted_content"]
        assert f'"encrypted_content":"{recorded["encrypted_content"]}"'.encode() in replay.sent[2]
        assert memory.verify().ok


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
        b'{"model":"m","messages":[{"role":"user","content":"\\u00e9"}]}',
        b'{"model":"m","model":"n","messages":[{"role":"user","content":"a"}]}',
        b'{"model":"m","temperature":1.0e0,"messages":[{"role":"user","content":"a"}]}',
    ],
    ids=["spaced", "ascii-escaped", "duplicate-key", "exponent"],
)
def test_a_request_body_the_log_cannot_give_back_byte_for_byte_is_refused(
    tmp_path: Path, body: bytes
) -> None:
    """A body given as bytes is promised back byte for byte (``request``): one not in the
    SDK's encoding would come back as other bytes, a stored value other than the one given.
    It is refused, and nothing is written."""
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as memory:
        with pytest.raises(InvalidEventError, match="request: "):
            memory.captures.record("odd", body, {"content": [{"type": "text", "text": "ok"}]})
        assert not memory.has_session("odd")


REQUEST = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


@pytest.mark.parametrize(
    ("request_body", "response_body", "refused"),
    [
        (REQUEST, b'{"content":[{"type":"text","text":"x","n":NaN}]}', "response: "),
        (REQUEST, b'{"content":[{"type":"text","text":"x","n":1e400}]}', "response: "),
        (REQUEST, b'{"content":[1]}', "response: "),
        (REQUEST, '{"content":[]}'.encode("utf-16-le"), "response: "),
        (b'{"messages":[],"temperature":NaN}', b'{"content":[]}', "request: "),
        ({"messages": [], "temperature": float("inf")}, b'{"content":[]}', "request: "),
        ({"messages": [{"role": "user", "content": b"hi"}]}, b'{"content":[]}', "request: "),
    ],
    ids=[
        "nan-answer",
        "huge-number-answer",
        "block-not-an-object",
        "utf-16-answer",
        "nan-sent",
        "inf-sent",
        "bytes",
    ],
)
def test_a_body_that_is_not_json_is_refused_and_the_session_stays_usable(
    tmp_path: Path, request_body: object, response_body: bytes, refused: str
) -> None:
    """A NaN, an Infinity or a number past a float is not JSON: a response holding one was
    recorded, and then every later call of the session (and ``conversation``, ``request``)
    raised ``ValueError`` for good, since the log keeps it; a request holding one (or a value
    JSON has no form for) raised ``ValueError`` or ``TypeError``, and a content block that is
    not an object ``AttributeError``. Each is refused as bad input, nothing is written, and the
    session then records calls as before."""
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as memory:
        memory.captures.record("chat", REQUEST, b'{"content":[{"type":"text","text":"a"}]}')
        before = snapshot(tmp_path)
        with pytest.raises(InvalidEventError, match=refused):
            memory.captures.record("chat", request_body, response_body)
        assert snapshot(tmp_path) == before
        memory.captures.record("chat", REQUEST, b'{"content":[{"type":"text","text":"b"}]}')
        assert memory.captures.request("chat", 2) == REQUEST
        assert len(memory.captures.conversation("chat")) == 2


def test_the_importer_checks_every_body_before_recording_any(tmp_path: Path) -> None:
    """A file whose second call holds a NaN: refused before the first is recorded (the
    importer checks every line first), naming the file and line."""
    init_workspace(tmp_path / "ws")
    good = '{"request":{"messages":[]},"response":{"content":[]}}'
    source = tmp_path / "calls.jsonl"
    source.write_text(good + "\n" + '{"request":{"messages":[]},"response":{"content":[NaN]}}\n')
    with Memory.open(tmp_path / "ws") as memory:
        with pytest.raises(InvalidEventError, match=r"calls.jsonl:2: response: "):
            import_exchanges(memory, "imported", source)
        assert not memory.has_session("imported")


def test_sealed_captures_round_trip_and_hold_no_plaintext(tmp_path: Path) -> None:
    init_encrypted(tmp_path)
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        replay = _converse(ana, "chat")
        assert ana.captures.request("chat", 3) == replay.sent[2]
        log = (memory.log_dir / "chat.jsonl").read_bytes()
        assert b"token bucket" not in log and b"encrypted_content" not in log
        with pytest.raises(NoSuchSessionError):
            memory.scoped(user="bob").captures.request("chat", 1)


def test_the_importer_records_calls_kept_elsewhere_and_refuses_a_bad_line(tmp_path: Path) -> None:
    init_workspace(tmp_path / "ws")
    request = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    good = {"request": request, "response": RECORDED["responses"][0]}
    source = tmp_path / "calls.jsonl"
    source.write_text(json.dumps(good) + "\n" + json.dumps({"request": request}) + "\n")
    with Memory.open(tmp_path / "ws") as memory:
        with pytest.raises(InvalidEventError, match=r"calls.jsonl:2: field 'response'"):
            import_exchanges(memory, "imported", source)
        assert not memory.has_session("imported")
        source.write_text(json.dumps(good) + "\n")
        records = import_exchanges(memory, "imported", source)
        assert [r.type for r in records] == ["messages_request", "messages_response"]
        sent = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        assert memory.captures.request("imported", 1) == sent


def test_the_core_imports_no_integration_and_no_sdk() -> None:
    code = (
        "import sys, airsspec, airsspec.integrations\n"
        "from airsspec.memory import Memory\n"
        "heavy = ('anthropic', 'airsspec.integrations.')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"

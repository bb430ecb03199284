"""A context as Anthropic or OpenAI ``messages``: valid for each SDK's own types, tool calls
and their results paired as each API requires, nothing chosen dropped."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from airsspec.memory import Memory
from projections.context_formats import build_messages
from projections.hot import HotEntry

anthropic_types = pytest.importorskip("anthropic.types")
openai_types = pytest.importorskip("openai.types.chat")
ANTHROPIC = TypeAdapter(list[anthropic_types.MessageParam])
OPENAI = TypeAdapter(list[openai_types.ChatCompletionMessageParam])


def read_all(value: Any) -> Any:
    """``value`` with every lazily validated iterable read (the SDKs type content as iterables,
    and an iterable's items are validated as it is read)."""
    if isinstance(value, dict):
        return {key: read_all(item) for key, item in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return [read_all(item) for item in value]


def valid(format: str, messages: list[dict[str, Any]]) -> None:
    """``messages`` are what the SDK's types accept, key for key (nothing the SDK would drop),
    and follow the API's order rules."""
    adapter = ANTHROPIC if format == "anthropic" else OPENAI
    assert read_all(adapter.validate_python(messages)) == messages

    if format == "anthropic":
        roles = [m["role"] for m in messages]
        assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))
        for index, message in enumerate(messages):
            calls = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
            if calls:  # every call answered in the very next message, results first
                following = messages[index + 1]["content"]
                answered = [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
                assert sorted(answered) == sorted(calls)
                assert [b["type"] for b in following[: len(calls)]] == ["tool_result"] * len(calls)
            for block in message["content"]:
                if block["type"] == "tool_result":
                    previous = messages[index - 1]["content"]
                    assert block["tool_use_id"] in [b.get("id") for b in previous]
    else:
        for index, message in enumerate(messages):
            if message["role"] == "tool":  # right after its call (or a sibling's answer)
                back = index - 1
                while messages[back]["role"] == "tool":
                    back -= 1
                calls = [c["id"] for c in messages[back].get("tool_calls", [])]
                assert message["tool_call_id"] in calls
            for call in message.get("tool_calls", []):
                answers = [
                    m["tool_call_id"]
                    for m in messages[index + 1 : index + 1 + len(message["tool_calls"])]
                    if m["role"] == "tool"
                ]
                assert call["id"] in answers


@pytest.fixture
def tool_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A memory whose session ``s1`` ran two tools (one failed); ``old`` holds a fact."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        tool_session(memory)
        yield memory


def tool_session(memory: Memory) -> None:
    memory.append("old", {"type": "user", "content": "The staging password rotates on Mondays"})
    memory.append("s1", {"type": "user", "content": "Run the tests please"})
    memory.append("s1", {"type": "thought", "content": "pytest first"})
    call = memory.append("s1", {"type": "action", "tool": "bash", "params": {"cmd": "pytest"}})
    other = memory.append("s1", {"type": "action", "tool": "fs.read", "params": {"p": "a.py"}})
    memory.append("s1", {"type": "observation", "result": "2 passed", "action_id": call.id})
    memory.append(
        "s1",
        {"type": "observation", "result": "no such file", "action_id": other.id, "is_error": True},
    )
    memory.append("s1", {"type": "assistant", "content": "All green."})
    memory.append("s1", {"type": "user", "content": "When does the password rotate?"})


@pytest.mark.parametrize("format", ["anthropic", "openai"])
def test_context_messages_pair_tool_calls_and_pass_the_sdk_types(
    tool_memory: Memory, format: str
) -> None:
    messages = tool_memory.context("s1", 2000, query="staging password rotates", format=format)
    valid(format, messages)
    dumped = orjson.dumps(messages).decode()
    assert "[recalled from old" in dumped and "rotates on Mondays" in dumped
    if format == "anthropic":
        uses = [b for m in messages for b in m["content"] if b["type"] == "tool_use"]
        results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
        assert [(u["name"], u["input"]) for u in uses] == [
            ("bash", {"cmd": "pytest"}),
            ("fs_read", {"p": "a.py"}),
        ]
        assert [(r["content"], r["is_error"]) for r in results] == [
            ("2 passed", False),
            ("ERROR: no such file", True),
        ]
        assert messages[-1] == {
            "role": "user",
            "content": [{"type": "text", "text": "When does the password rotate?"}],
        }
    else:
        assert messages[0]["role"] == "system" and "rotates on Mondays" in messages[0]["content"]
        calls = [c for m in messages for c in m.get("tool_calls", [])]
        assert [orjson.loads(c["function"]["arguments"]) for c in calls] == [
            {"cmd": "pytest"},
            {"p": "a.py"},
        ]
        tools = [m for m in messages if m["role"] == "tool"]
        assert [t["content"] for t in tools] == ["2 passed", "ERROR: no such file"]
        assert messages[-1] == {"role": "user", "content": "When does the password rotate?"}


def entry(seq: int, type: str, text: str) -> HotEntry:
    return HotEntry(
        seq=seq, id=f"e{seq}", ts="2026-01-01T00:00:00Z", type=type, text=text, tokens=1, hash="h"
    )


@pytest.mark.parametrize("format", ["anthropic", "openai"])
def test_a_tool_result_whose_call_is_out_of_the_window_is_text(format: str) -> None:
    from eventlog.schema import ObservationRecord

    # only the payload matters to the layout: the envelope is left out
    answer = ObservationRecord.model_construct(type="observation", result="42", action_id="e1")
    messages = build_messages(
        format,
        lead=["## Memory"],
        recalled="",
        entries=[entry(2, "observation", "42 lines"), entry(3, "assistant", "done")],
        records={2: answer},
    )
    valid(format, messages)
    text = orjson.dumps(messages).decode()
    assert "[tool result] 42 lines" in text and "tool_use" not in text and "tool_call" not in text

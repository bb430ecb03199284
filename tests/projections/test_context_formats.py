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


def long_question(memory: Memory) -> str:
    """A session whose one message is about 290 tokens, the question at its end."""
    text = " ".join(f"line {i} of the pasted log: worker {i} restarted." for i in range(30))
    text += " Why do the workers keep restarting?"
    memory.append("q", {"type": "user", "content": text})
    return text


@pytest.mark.parametrize("format", ["text", "anthropic", "openai"])
def test_a_message_over_the_budget_is_cut_with_a_marker_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, format: str
) -> None:
    from airsspec.memory import elided_seqs

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        text = long_question(memory)
        assert memory.token_counter().count(text) > 250
        context = memory.context("q", 200, format=format)
        dumped = context if isinstance(context, str) else orjson.dumps(context).decode()
        assert elided_seqs(context) == [1]
        assert "tokens elided; airsspec replay q --from 1 --until 1" in dumped
        assert "line 0 of the pasted log" in dumped and "keep restarting?" in dumped
        if format == "text":
            assert memory.token_counter().count(context) <= 200
        else:
            valid(format, context)
            assert context[-1]["role"] == "user"


@pytest.mark.parametrize("format", ["anthropic", "openai"])
def test_no_message_within_the_budget_still_gives_a_valid_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, format: str
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        messages = memory.context("nobody-yet", 50, format=format)
        valid(format, messages)
        assert messages and messages[-1]["role"] == "user"


@pytest.mark.parametrize("format", ["anthropic", "openai"])
def test_tool_call_ids_are_short_stable_and_unique(tool_memory: Memory, format: str) -> None:
    first = tool_memory.context("s1", 2000, format=format)
    again = tool_memory.context("s1", 2000, format=format)
    dumped = orjson.dumps(first).decode()
    if format == "anthropic":
        ids = [b["id"] for m in first for b in m["content"] if b["type"] == "tool_use"]
    else:
        ids = [c["id"] for m in first for c in m.get("tool_calls", [])]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert all(len(i) <= 40 for i in ids)
    assert orjson.dumps(again).decode() == dumped  # stable across builds
    records = tool_memory.replay("s1")
    assert not any(r.id in dumped for r in records)  # derived from the record id, not it


@pytest.mark.parametrize("format", ["anthropic", "openai"])
def test_thoughts_are_left_out_of_api_formats_unless_asked(
    tool_memory: Memory, format: str
) -> None:
    plain = orjson.dumps(tool_memory.context("s1", 2000, format=format)).decode()
    asked = orjson.dumps(tool_memory.context("s1", 2000, format=format, thoughts=True)).decode()
    assert "pytest first" not in plain
    assert "[thought] pytest first" in asked
    assert "pytest first" in tool_memory.context("s1", 2000)  # the text format shows all


def test_the_cli_says_which_message_it_cut(tmp_path: Path) -> None:
    from tests.support.cli import run_cli

    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}
    with Memory.open(tmp_path, create=True) as memory:
        long_question(memory)
    shown = run_cli("context", "q", "--budget", "200", "--json", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    answer = orjson.loads(shown.stdout)
    assert answer["truncated"] == [1] and "keep restarting?" in answer["context"]
    assert b"shown cut to fit the budget: #1" in shown.stderr
    messages = run_cli(
        "context", "q", "--budget", "200", "--format", "openai", cwd=tmp_path, env=env
    )
    assert orjson.loads(messages.stdout)["truncated"] == [1]

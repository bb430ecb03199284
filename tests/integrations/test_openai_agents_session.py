"""The OpenAI Agents SDK's ``Session`` over the log (``airsspec.integrations.openai_agents``):
driven by the SDK's own ``Runner`` with a model implemented here (the SDK's ``Model``
interface; no network), items come back equal to what was added, pops and clears are events
``replay`` shows, ``verify`` stays green, and a scoped memory never sees another user's items."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
from agents.tracing import set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from airsspec.errors import NoSuchSessionError
from airsspec.integrations.openai_agents import AirsspecSession
from airsspec.memory import Memory
from tests.conftest import init_workspace

set_tracing_disabled(True)


class ScriptedModel(Model):
    """A model that calls the ``weather`` tool once, then answers with what the tool said;
    it records the input it was given on each call."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, *args, **kwargs) -> ModelResponse:  # type: ignore[no-untyped-def, override]
        self.inputs.append(input)
        outputs = [
            i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        turn = len(self.inputs)
        if len(outputs) < sum(1 for i in input if isinstance(i, dict) and i.get("role") == "user"):
            item: Any = ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{turn}",
                call_id=f"call_{turn}",
                name="weather",
                arguments='{"city": "Lisbon"}',
                status="completed",
            )
        else:
            text = f"It is {outputs[-1]['output']} (turn {turn})"
            item = ResponseOutputMessage(
                type="message",
                id=f"msg_{turn}",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run without streaming")


@function_tool
def weather(city: str) -> str:
    """The weather in ``city``."""
    return f"sunny in {city}"


@pytest.fixture
def memory(tmp_path: Path):
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as opened:
        yield opened


def test_runner_keeps_the_conversation_on_the_log_and_resumes_it(memory: Memory) -> None:
    model = ScriptedModel()
    agent = Agent(name="helper", model=model, tools=[weather])
    session = AirsspecSession("chat-1", memory)

    first = asyncio.run(Runner.run(agent, "Weather in Lisbon?", session=session))
    assert first.final_output == "It is sunny in Lisbon (turn 2)"
    again = AirsspecSession("chat-1", memory)  # a new process would open the same log
    second = asyncio.run(Runner.run(agent, "And now?", session=again))
    assert second.final_output == "It is sunny in Lisbon (turn 4)"

    # the model was given the first run's items back from the log on the second run
    resumed = model.inputs[2]
    assert [i.get("role") or i.get("type") for i in resumed] == [
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
    ]
    items = asyncio.run(again.get_items())
    assert items[:4] == resumed[:4]
    types = [r.type for r in memory.replay("chat-1")]
    assert types == ["user", "action", "observation", "assistant"] * 2
    assert memory.verify().ok


def test_items_come_back_equal_and_edits_are_events(memory: Memory) -> None:
    items: list[Any] = [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}]},
        {"role": "system", "content": "be brief"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "think"}],
            "encrypted_content": "gAAAA==",
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "c1", "output": "é 🙂 \u2028"},
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
        {"type": "item_reference", "id": "r1"},
    ]
    session = AirsspecSession("chat-2", memory)
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    assert asyncio.run(session.get_items(limit=2)) == items[-2:]
    assert asyncio.run(session.get_items(limit=0)) == []

    assert asyncio.run(session.pop_item()) == items[-1]
    assert asyncio.run(session.get_items()) == items[:-1]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
    asyncio.run(session.add_items([items[0]]))
    assert asyncio.run(session.get_items()) == [items[0]]

    records = list(memory.replay("chat-2"))
    popped = next(r for r in records if r.type == "item_popped")
    assert records[popped.of_seq - 1].meta["agents_item"] == items[-1]
    assert [r.type for r in records[len(items) :]] == ["item_popped", "items_cleared", "user"]
    assert memory.verify().ok


def test_two_pops_at_once_take_two_items(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sessions over the log (two processes, say) pop at once, both having read the same
    last item (a barrier after their first read): one pops it, the other is told the session
    moved, reads again and pops the item before it; no item is popped twice."""
    import threading

    items = [{"role": "user", "content": f"item {i}"} for i in range(4)]
    asyncio.run(AirsspecSession("chat-3", memory).add_items(items))
    barrier = threading.Barrier(2)
    held = AirsspecSession._held
    first_reads: set[int] = set()

    def read_then_wait(session: AirsspecSession) -> Any:
        found = held(session)
        if threading.get_ident() not in first_reads:
            first_reads.add(threading.get_ident())
            assert found[0][-1][1] == items[-1]  # both read the same last item
            barrier.wait()
        return found

    monkeypatch.setattr(AirsspecSession, "_held", read_then_wait)
    popped: list[Any] = []
    with Memory.open(tmp_path) as other:
        sessions = [AirsspecSession("chat-3", memory), AirsspecSession("chat-3", other)]
        threads = [threading.Thread(target=lambda s=s: popped.append(s.pop())) for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(p["content"] for p in popped) == ["item 2", "item 3"]
    assert asyncio.run(AirsspecSession("chat-3", memory).get_items()) == items[:2]
    pops = [r.of_seq for r in memory.replay("chat-3") if r.type == "item_popped"]
    assert len(pops) == 2 == len(set(pops))


def test_a_pop_against_a_writer_that_never_stops_gives_up(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pop that loses to another writer reads again, but not forever: against a writer
    that lands a record after every read (here, each read is followed by one), it stops after
    ``POP_ATTEMPTS`` reads with ``SessionMovedError`` (a conflict: the caller may try again),
    having popped nothing."""
    from airsspec.errors import SessionMovedError
    from airsspec.integrations import openai_agents

    session = AirsspecSession("busy", memory)
    asyncio.run(session.add_items([{"role": "user", "content": "first"}]))
    held = AirsspecSession._held
    reads = 0

    def read_then_another_lands(self: AirsspecSession) -> Any:
        nonlocal reads
        reads += 1
        found = held(self)
        memory.append("busy", {"type": "user", "content": f"landed after read {reads}"})
        return found

    monkeypatch.setattr(AirsspecSession, "_held", read_then_another_lands)
    with pytest.raises(SessionMovedError, match="'busy'"):
        asyncio.run(session.pop_item())
    assert reads == openai_agents.POP_ATTEMPTS
    assert not [r for r in memory.replay("busy") if r.type == "item_popped"]


def test_a_scoped_session_never_sees_another_users_items(memory: Memory) -> None:
    ana, bo = memory.scoped(user="ana"), memory.scoped(user="bo")
    asyncio.run(AirsspecSession("ana-chat", ana).add_items([{"role": "user", "content": "secret"}]))
    intruder = AirsspecSession("ana-chat", bo)
    assert asyncio.run(intruder.get_items()) == []
    assert asyncio.run(intruder.pop_item()) is None
    with pytest.raises(NoSuchSessionError):  # as if it did not exist: no one learns it does
        asyncio.run(intruder.add_items([{"role": "user", "content": "mine now"}]))
    asyncio.run(intruder.clear_session())  # another user's session reads as none: nothing
    owner = AirsspecSession("ana-chat", ana)
    assert asyncio.run(owner.get_items()) == [{"role": "user", "content": "secret"}]


def test_compaction_gives_the_summary_in_place_of_the_items_it_covers(memory: Memory) -> None:
    session = AirsspecSession("chat-3", memory, compaction=True)
    turns: list[Any] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * 40}
        for i in range(40)
    ]
    asyncio.run(session.add_items(turns))
    memory.compact("chat-3", force=True)
    items = asyncio.run(session.get_items())
    compaction = next(r for r in memory.replay("chat-3") if r.type == "compaction")
    assert items[0]["role"] == "system" and compaction.summary in items[0]["content"]
    assert items[1:] == turns[compaction.to_seq :]
    plain = AirsspecSession("chat-3", memory)  # without compaction: every item, as added
    assert asyncio.run(plain.get_items()) == turns


_ITEM = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": st.text(max_size=20)}
)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_ITEM, min_size=1, max_size=3)),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=8,
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, limit=st.none() | st.integers(min_value=0, max_value=6))
def test_the_fold_matches_a_list_under_any_edits(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]], limit: int | None
) -> None:
    root = init_workspace(tmp_path_factory.mktemp("ws"))
    model: list[dict[str, Any]] = []
    with Memory.open(root) as memory:
        session = AirsspecSession("edits", memory)
        for op, items in ops:
            if op == "add":
                session.add(items)
                model.extend(items)
            elif op == "pop":
                assert session.pop() == (model.pop() if model else None)
            else:
                session.clear()
                model.clear()
        expected = model if limit is None else model[len(model) - limit :] if limit else []
        assert session.items(limit) == expected
        assert AirsspecSession("edits", memory).items() == model  # a rebuild from the log agrees

"""LangGraph's ``BaseCheckpointSaver`` over the log (``AirsspecSaver``): LangGraph's own
conformance suite (``langgraph-checkpoint-conformance``) passes every base capability; a real
``StateGraph`` compiled with the saver and the store resumes a thread from the log; a thread's
history is in ``replay``, ``verify`` stays green, ``as_of`` reads a thread as it was; a scoped
memory's saver never reads another user's thread."""

from __future__ import annotations

import asyncio
import operator
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip(
    "langgraph.checkpoint.conformance", reason="the langgraph extra is not installed"
)

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from airsspec.errors import NoSuchSessionError, ReadOnlyTokenError, UnreadableRecordError
from airsspec.integrations.langgraph import AirsspecSaver, AirsspecStore
from airsspec.memory import Memory
from tests.conftest import init_workspace, snapshot


@pytest.fixture
def memory(tmp_path: Path, offline: None):
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as opened:
        yield opened


@pytest.mark.slow
def test_langgraph_conformance_suite_passes_every_base_capability(tmp_path: Path) -> None:
    @checkpointer_test(name="AirsspecSaver")
    async def saver():  # a fresh workspace per capability suite
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        init_workspace(root)
        with Memory.open(root) as memory:
            yield AirsspecSaver(memory)

    report = asyncio.run(validate(saver))
    report.print_report()
    assert report.passed_all_base()
    base = {"put", "put_writes", "get_tuple", "list", "delete_thread"}
    assert base <= {name for name, result in report.results.items() if result.passed}


class State(TypedDict):
    said: Annotated[list[str], operator.add]
    count: int


def _graph(memory: Memory) -> Any:
    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        count = state.get("count", 0) + 1
        store.put(("notes", "ana"), f"turn-{count}", {"text": f"heard {state['said'][-1]}"})
        return {"said": [f"reply {count}"], "count": count}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(checkpointer=AirsspecSaver(memory), store=AirsspecStore(memory))


def test_a_state_graph_resumes_its_thread_from_the_log(memory: Memory) -> None:
    config = {"configurable": {"thread_id": "thread-1"}}
    first = _graph(memory).invoke({"said": ["hello"]}, config)
    assert first == {"said": ["hello", "reply 1"], "count": 1}
    # a new graph over the same workspace (another process, say) resumes the thread
    second = _graph(memory).invoke({"said": ["again"]}, config)
    assert second == {"said": ["hello", "reply 1", "again", "reply 2"], "count": 2}

    types = [r.type for r in memory.replay("thread-1")]
    assert types.count("checkpoint") == len(list(AirsspecSaver(memory).list(config)))
    assert "checkpoint_writes" in types
    notes = AirsspecStore(memory).search(("notes", "ana"))
    assert sorted(n.key for n in notes) == ["turn-1", "turn-2"]
    assert memory.verify().ok


def test_as_of_reads_the_thread_as_it_was(memory: Memory) -> None:
    config = {"configurable": {"thread_id": "thread-2"}}
    graph = _graph(memory)
    graph.invoke({"said": ["one"]}, config)
    head = max(r.seq for r in memory.replay("thread-2"))
    graph.invoke({"said": ["two"]}, config)

    saver = AirsspecSaver(memory)
    then = saver.as_of(head)
    assert then.get_tuple(config).checkpoint["channel_values"]["count"] == 1
    assert saver.get_tuple(config).checkpoint["channel_values"]["count"] == 2
    assert len(list(then.list(config))) < len(list(saver.list(config)))
    with pytest.raises(ReadOnlyTokenError):
        then.delete_thread("thread-2")


def test_delete_thread_is_an_event_and_replay_keeps_the_history(memory: Memory) -> None:
    config = {"configurable": {"thread_id": "thread-3"}}
    _graph(memory).invoke({"said": ["hi"]}, config)
    saver = AirsspecSaver(memory)
    before = len(list(memory.replay("thread-3")))
    saver.delete_thread("thread-3")
    assert saver.get_tuple(config) is None and list(saver.list(config)) == []
    records = list(memory.replay("thread-3"))
    assert len(records) == before + 1 and records[-1].type == "thread_deleted"
    assert saver.as_of(before).get_tuple(config) is not None  # the past is still readable
    assert memory.verify().ok


def test_a_scoped_saver_never_reads_another_users_thread(memory: Memory) -> None:
    ana, bo = memory.scoped(user="ana"), memory.scoped(user="bo")
    config = {"configurable": {"thread_id": "ana-thread"}}
    _graph(ana).invoke({"said": ["private"]}, config)
    intruder = AirsspecSaver(bo)
    assert intruder.get_tuple(config) is None
    assert list(intruder.list(None)) == []
    assert [t.config for t in AirsspecSaver(ana).list(None)]  # the owner lists hers
    with pytest.raises(NoSuchSessionError):
        _graph(bo).invoke({"said": ["let me in"]}, config)


@pytest.mark.parametrize(
    "made",
    [
        {"checkpoint": {}, "metadata": {}},  # neither stored value is the saver's
        {"checkpoint": {"json": {}}, "metadata": {"json": {}}},  # no channel versions
        {"checkpoint": {"type": "msgpack", "data": "not base64!"}, "metadata": {"json": {}}},
        {"checkpoint": {"json": {"channel_versions": {}}}, "metadata": {}, "blobs": {"c": 1}},
        {"type": "checkpoint_writes", "task_id": "t", "writes": [{"channel": "c"}]},  # no idx
    ],
)
def test_a_checkpoint_made_by_hand_hides_no_other_thread(
    memory: Memory, made: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A user may append a ``checkpoint`` record by hand to a session of theirs (the catalog
    takes it): reading that thread names the record (``UnreadableRecordError``), and a listing
    of every thread (an admin's) leaves it out with a warning and lists the others."""
    ana, bo = memory.scoped(user="ana"), memory.scoped(user="bo")
    _graph(ana).invoke({"said": ["hello"]}, {"configurable": {"thread_id": "ana-thread"}})
    seq = bo.append("bo-thread", {"type": "checkpoint", "checkpoint_id": "x", **made}).seq
    kind = made.get("type", "checkpoint")
    before = snapshot(memory.log_dir)
    admin = AirsspecSaver(memory)
    listed = list(admin.list(None))
    assert {t.config["configurable"]["thread_id"] for t in listed} == {"ana-thread"}
    assert f"'bo-thread', seq {seq}: a {kind} record" in caplog.text
    config = {"configurable": {"thread_id": "bo-thread"}}
    for read in (lambda: admin.get_tuple(config), lambda: list(admin.list(config))):
        with pytest.raises(UnreadableRecordError, match=f"'bo-thread', seq {seq}: a {kind} "):
            read()
    assert snapshot(memory.log_dir) == before

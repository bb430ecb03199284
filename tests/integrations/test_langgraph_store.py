"""LangGraph's ``BaseStore`` over the log (``AirsspecStore``). LangGraph ships no conformance
suite for stores (its checkpointer suite is run in ``test_langgraph_checkpointer``), so the
cases of its own in-memory store tests (``libs/checkpoint/tests/test_store.py`` and
``test_store_ttl.py`` upstream) are ported here: namespaces listed by prefix, suffix, wildcard,
depth and page; invalid namespaces refused; put, get, update, delete; search by filter
(operators, nested values) and by query (through this memory's own search); TTL. And what the
log adds: every write is an event in ``replay``, ``verify`` stays green, a batch's reads see
the store as it was before its puts, and a scoped memory's store is its own."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.store.base", reason="the langgraph extra is not installed")

from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from airsspec.errors import InvalidEventError, ScopeError
from airsspec.integrations.langgraph import STORE_SESSION, AirsspecStore
from airsspec.memory import Memory
from tests.conftest import init_workspace

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


@pytest.fixture
def memory(tmp_path: Path, offline: None):
    init_workspace(tmp_path)
    with Memory.open(tmp_path) as opened:
        yield opened


@pytest.fixture
def store(memory: Memory) -> AirsspecStore:
    return AirsspecStore(memory)


def test_list_namespaces_by_prefix_suffix_wildcard_depth_and_page(store: AirsspecStore) -> None:
    store.batch([PutOp(ns, f"id_{i}", {"data": i}) for i, ns in enumerate(NAMESPACES)])
    assert store.list_namespaces(prefix=("a", "b")) == NAMESPACES[:4]
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == NAMESPACES[:2]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == NAMESPACES[2:4]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456", "settings"),
    ]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(max_depth=1) == [("a",), ("admin",), ("b",), ("users",)]
    store.delete(("users", "123"), "id_6")  # a namespace with no item left is not listed
    assert store.list_namespaces(prefix=("users",)) == [("users", "456", "settings")]


def test_invalid_namespaces_are_refused_and_nothing_is_written(
    store: AirsspecStore, memory: Memory
) -> None:
    for namespace in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "key", {"foo": "bar"})
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.aput(namespace, "key", {"foo": "bar"}))
    assert not memory.has_session(STORE_SESSION)


def test_put_get_update_delete_are_events_and_reads_are_their_fold(
    store: AirsspecStore, memory: Memory
) -> None:
    ns = ("users", "ana")
    store.put(ns, "prefs", {"theme": "dark", "tags": ["a"]})
    first = store.get(ns, "prefs")
    assert first is not None and first.value == {"theme": "dark", "tags": ["a"]}
    store.put(ns, "prefs", {"theme": "light"})
    second = store.get(ns, "prefs")
    assert second.value == {"theme": "light"}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    assert asyncio.run(store.aget(ns, "prefs")) == second
    store.delete(ns, "prefs")
    assert store.get(ns, "prefs") is None and store.get(ns, "missing") is None
    assert [r.type for r in memory.replay(STORE_SESSION)] == [
        "store_put",
        "store_put",
        "store_deleted",
    ]
    assert AirsspecStore(memory).get(ns, "prefs") is None  # a new store folds the same log
    with pytest.raises(InvalidEventError, match="64-bit"):  # the log cannot hold it exactly
        store.put(ns, "huge", {"n": 2**70})
    assert len(list(memory.replay(STORE_SESSION))) == 3  # nothing stored in its place
    assert memory.verify().ok


def test_a_batch_reads_the_store_as_it_was_before_its_puts(
    store: AirsspecStore, memory: Memory
) -> None:
    ns = ("docs",)
    results = store.batch(
        [PutOp(ns, "k", {"v": 1}), GetOp(ns, "k"), PutOp(ns, "k", {"v": 2}), SearchOp(ns)]
    )
    assert results == [None, None, None, []]
    assert store.get(ns, "k").value == {"v": 2}
    assert [r.type for r in memory.replay(STORE_SESSION)] == ["store_put"]  # the last put only


def test_search_filters_values_as_langgraph_does(store: AirsspecStore) -> None:
    ns = ("docs",)
    store.put(ns, "a", {"score": 3, "kind": "note", "meta": {"lang": "en"}})
    store.put(ns, "b", {"score": 7, "kind": "note", "meta": {"lang": "pt"}})
    store.put(ns, "c", {"score": 9, "kind": "task", "meta": {"lang": "en"}})
    store.put(("other",), "d", {"score": 9, "kind": "note"})

    def keys(**kwargs) -> list[str]:
        return [item.key for item in store.search(ns, **kwargs)]

    assert keys() == ["a", "b", "c"]
    assert keys(filter={"kind": "note"}) == ["a", "b"]
    assert keys(filter={"score": {"$gt": 5}}) == ["b", "c"]
    assert keys(filter={"score": {"$lte": 7}, "kind": {"$ne": "task"}}) == ["a", "b"]
    assert keys(filter={"meta": {"lang": "en"}}) == ["a", "c"]
    assert keys(limit=1, offset=1) == ["b"]
    assert [i.key for i in store.search(())] == ["a", "b", "c", "d"]


def test_search_with_a_query_uses_the_memorys_search(store: AirsspecStore) -> None:
    ns = ("docs",)
    store.put(ns, "doc1", {"text": "short text about cooking pasta"})
    store.put(ns, "doc2", {"text": "the deployment runbook for the billing service"})
    store.put(
        ns, "doc3", {"text": "billing service incident notes"}, index=["title"]
    )  # nothing to read
    store.put(ns, "doc4", {"text": "gardening tips"}, index=False)
    hits = store.search(ns, query="billing service runbook")
    assert hits[0].key == "doc2" and hits[0].score is not None
    assert {h.key for h in hits if h.score is not None} == {"doc2"}  # doc3's text is not indexed
    assert {h.key for h in hits} == {"doc1", "doc2", "doc3", "doc4"}  # the rest, unscored
    store.put(ns, "doc2", {"text": "now about cheese"})  # an old version no longer matches
    assert all(h.score is None for h in store.search(ns, query="billing runbook"))
    hits = store.search(ns, query="cheese", filter={"text": "now about cheese"})
    assert [(h.key, h.score is not None) for h in hits] == [("doc2", True)]


def test_ttl_is_in_the_log_and_expired_items_are_gone(memory: Memory) -> None:
    now = datetime.now(UTC)
    clock = {"now": now}
    store = AirsspecStore(memory, ttl={"default_ttl": 1.0}, clock=lambda: clock["now"])
    ns = ("session", "cache")
    store.put(ns, "short", {"v": 1})  # the default: one minute
    store.put(ns, "long", {"v": 2}, ttl=60)
    store.put(ns, "kept", {"v": 3}, ttl=None)
    assert [r.ttl for r in memory.replay(STORE_SESSION)] == [1.0, 60, None]

    clock["now"] = now + timedelta(seconds=30)
    assert store.get(ns, "short", refresh_ttl=True) is not None
    touched = list(memory.replay(STORE_SESSION))[-1]
    assert touched.type == "store_touched" and touched.items == [(["session", "cache"], "short")]
    assert store.get(ns, "kept", refresh_ttl=True) is not None  # no TTL: nothing to refresh
    assert list(memory.replay(STORE_SESSION))[-1] == touched

    clock["now"] = now + timedelta(minutes=5)
    assert store.get(ns, "short") is None
    assert {i.key for i in store.search(ns)} == {"long", "kept"}
    assert store.sweep_expired() == 1
    deleted = list(memory.replay(STORE_SESSION))[-1]
    assert (deleted.type, deleted.key, deleted.reason) == ("store_deleted", "short", "expired")
    assert store.sweep_expired() == 0
    assert memory.verify().ok


def test_a_scoped_store_never_sees_another_users_items(memory: Memory) -> None:
    ana = AirsspecStore(memory.scoped(user="ana"))
    bo = AirsspecStore(memory.scoped(user="bo"))
    ana.put(("notes",), "secret", {"text": "ana's secret plan"})
    bo.put(("notes",), "mine", {"text": "bo's plan"})
    assert ana.session != bo.session
    assert bo.get(("notes",), "secret") is None
    assert [i.key for i in bo.search(("notes",), query="secret plan")] == ["mine"]
    assert bo.list_namespaces() == [("notes",)] and len(bo.search(())) == 1
    assert [i.key for i in ana.search(("notes",))] == ["secret"]


@pytest.mark.parametrize("victim", [None, "ana"], ids=["the-teams", "another-users"])
def test_another_users_store_session_can_be_neither_taken_nor_blocked(
    memory: Memory, victim: str | None
) -> None:
    """Bo names a thread after the store session of the team or of ana (its name is derived
    from the scope, so anyone can compute it) and tries to write there first. The gate refuses
    the creation, nothing is written, and the victim's store then works and is its own."""
    bo = memory.scoped(user="bo")
    owner = memory if victim is None else memory.scoped(user=victim)
    claimed = AirsspecStore(owner).session
    with pytest.raises(ScopeError, match="another principal's langgraph-store"):
        bo.append(claimed, {"type": "user", "content": "mine first"})
    assert not memory.kernel.log.has(claimed)
    AirsspecStore(owner).put(("secrets",), "k", {"pin": "4321"})
    assert AirsspecStore(owner).get(("secrets",), "k").value == {"pin": "4321"}
    assert AirsspecStore(bo).search(("secrets",)) == []
    bo_own = AirsspecStore(bo).session
    bo.append(bo_own, {"type": "user", "content": "his own store session is his to create"})


def test_a_store_session_an_admin_wrote_first_is_refused_not_shared(memory: Memory) -> None:
    """An admin (trusted to write anywhere) who writes first into ana's store session makes it
    the team's: ana's store is refused (``ScopeError``), never writing where the team reads."""
    ana = memory.scoped(user="ana")
    claimed = AirsspecStore(ana).session
    memory.append(claimed, {"type": "user", "content": "the team's first"})
    with pytest.raises(ScopeError, match="the team"):
        AirsspecStore(ana).put(("secrets",), "k", {"pin": "4321"})
    assert all("4321" not in str(r.model_dump()) for r in memory.replay(claimed))


def test_a_read_only_memorys_store_reads_and_refreshes_nothing(memory: Memory) -> None:
    AirsspecStore(memory).put(("cache",), "k", {"v": 1}, ttl=5)
    before = list(memory.replay(STORE_SESSION))
    reader = AirsspecStore(memory.scoped(read_only=True))
    assert reader.get(("cache",), "k", refresh_ttl=True).value == {"v": 1}
    assert list(memory.replay(STORE_SESSION)) == before


_NS = st.sampled_from([("a",), ("a", "b"), ("c",)])
_STORE_OPS = st.lists(
    st.tuples(
        _NS,
        st.sampled_from(["k1", "k2"]),
        st.none() | st.dictionaries(st.text(max_size=3), st.integers(-(2**63), 2**63), max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_STORE_OPS, max_size=4))
def test_the_fold_matches_a_dict_under_any_puts_and_deletes(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple]]
) -> None:
    root = init_workspace(tmp_path_factory.mktemp("ws"))
    model: dict[tuple, dict] = {}
    with Memory.open(root) as memory:
        store = AirsspecStore(memory)
        for ops in batches:
            store.batch([PutOp(ns, key, value) for ns, key, value in ops])
            for ns, key, value in ops:
                if value is None:
                    model.pop((ns, key), None)
                else:
                    model[(ns, key)] = value
        held = {(i.namespace, i.key): i.value for i in AirsspecStore(memory).search((), limit=100)}
        assert held == model
        assert store.list_namespaces() == sorted({ns for ns, _ in model})


def test_a_long_value_is_searched_in_pieces_and_found_once(store: AirsspecStore) -> None:
    filler = " ".join(f"filler{i}" for i in range(400))
    store.put(("docs",), "long", {"text": f"{filler} the zebra migration schedule {filler}"})
    store.put(("docs",), "short", {"text": "nothing to see"})
    hits = store.search(("docs",), query="zebra migration schedule")
    assert [(h.key, h.score is not None) for h in hits] == [("long", True), ("short", False)]


def test_a_time_to_live_past_the_end_of_time_never_expires_and_the_store_stays_readable(
    store: AirsspecStore, memory: Memory
) -> None:
    """A put's ``ttl`` (minutes, any positive float the log takes) so large that its end is
    no date (past year 9999) was stored, then broke every read of the store with an
    ``OverflowError``, deletes included, for good: the log keeps the put. Such an item never
    expires; the rest of the store reads and writes as before."""
    ns = ("cache",)
    store.put(ns, "kept", {"v": 1})
    store.put(ns, "forever", {"v": 2}, ttl=1e15)
    assert [r.ttl for r in memory.replay(STORE_SESSION)] == [None, 1e15]
    assert store.get(ns, "forever").value == {"v": 2}
    assert store.get(ns, "forever", refresh_ttl=True).value == {"v": 2}
    assert {i.key for i in store.search(ns)} == {"kept", "forever"}
    assert store.list_namespaces() == [ns]
    assert store.sweep_expired() == 0
    store.delete(ns, "forever")
    assert store.get(ns, "forever") is None and store.get(ns, "kept").value == {"v": 1}
    assert memory.verify().ok


def test_a_search_with_a_query_and_a_large_page_answers(store: AirsspecStore) -> None:
    """A query with ``limit=50`` (or an ``offset`` past 24) asked this memory's search for
    more hits than it gives (``k`` at most ``SEARCH_MAX_K``) and raised
    ``InvalidQueryError`` for any store: the page is answered, the best hits scored first."""
    ns = ("docs",)
    store.put(ns, "match", {"text": "the zebra migration schedule"})
    for i in range(30):
        store.put(ns, f"other-{i:02}", {"text": f"unrelated note {i}"})
    hits = store.search(ns, query="zebra migration", limit=50)
    assert len(hits) == 31 and hits[0].key == "match" and hits[0].score is not None
    assert len(store.search(ns, query="zebra", offset=30, limit=5)) == 1

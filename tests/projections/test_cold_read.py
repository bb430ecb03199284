"""The cold tier's read path (pylance, ``projections.cold_read``) answers what lancedb answers.

The table is written by lancedb (``ColdStore``) with every index the tier makes (IVF-PQ,
full-text, scalar); each search ``recall`` runs is asked once through lancedb, as ``recall``
asked it before, and once through pylance: the same rows in the same order, the same distances
and BM25 scores within float tolerance. ``maintain`` decides with pylance that nothing is due,
as lancedb would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from projections import cold_read
from projections.cold import ColdStore
from projections.recall import (
    NPROBES,
    REFINE_FACTOR,
    _nearest,
    _text_rows,
    _vector_rows,
    _where,
    _Wider,
)
from projections.units import UNIT_FIELDS, Unit

DIM = 16
WORDS = [
    "webhook",
    "retry",
    "backoff",
    "token",
    "bucket",
    "limiter",
    "export",
    "csv",
    "page",
    "release",
    "sign",
    "login",
]
COLUMNS = ["unit_id", "ts", "text", "kind", "vector"]


def units(count: int) -> list[Unit]:
    """``count`` messages over 8 sessions, two to four words each, a timestamp per minute."""
    rng = np.random.default_rng(1)
    return [
        Unit(
            f"s{i % 8}:{i}:0",
            "message",
            "user",
            " ".join(rng.choice(WORDS, size=int(rng.integers(2, 5)))),
            session=f"s{i % 8}",
            record_seq=i,
            ts=f"2026-01-01T{i // 60 % 24:02d}:{i % 60:02d}:00Z",
            event_ids=(f"e{i}",),
            hashes=(f"h{i}",),
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ColdStore:
    """A table of 1200 rows in clusters, with an ANN index (35 partitions) and the others,
    then 300 rows more that no index holds yet (searched by scan)."""
    store = ColdStore(tmp_path_factory.mktemp("cold"), "test", DIM)
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(12, DIM))
    made = units(1500)
    noisy = centers[np.arange(len(made)) % 12] + 0.3 * rng.normal(size=(len(made), DIM))
    vectors = [(v / np.linalg.norm(v)).astype("float32") for v in noisy]
    store.add(made[:1200], vectors[:1200], [""] * 1200)
    store.maintain(ann_min_rows=1000)
    store.add(made[1200:], vectors[1200:], [""] * 300)
    return store


def queries() -> list[np.ndarray]:
    rng = np.random.default_rng(2)
    return [(v / np.linalg.norm(v)).astype("float32") for v in rng.normal(size=(4, DIM))]


FILTERS = [
    "",
    _where("s3", None, None, None),
    _where(None, "2026-01-01T05:00:00Z", "2026-01-01T09:00:00Z", ["message"]),
    _where(None, None, None, None, {"s1", "s2"}, "bob", set()),
]


def lancedb_nearest(table: Any, vector: np.ndarray, where: str, n: int, exact: bool) -> Any:
    """The vector search as ``recall`` asked lancedb for it."""
    search = table.search(vector, vector_column_name="vector").distance_type("cosine")
    if exact:
        search = search.bypass_vector_index()
    else:
        search = search.nprobes(NPROBES).refine_factor(REFINE_FACTOR)
    search = search.limit(n).select([*COLUMNS, "_distance"])
    return (search.where(where, prefilter=True) if where else search).to_arrow()


def lancedb_full_text(table: Any, query: str, where: str, n: int) -> Any:
    """The full-text search as ``recall`` asked lancedb for it."""
    search = table.search(query, query_type="fts", fts_columns="search_text")
    search = search.limit(n).select([*COLUMNS, "_score"])
    return (search.where(where, prefilter=True) if where else search).to_arrow()


def test_the_table_read_has_every_index_the_writer_made(store: ColdStore) -> None:
    dataset = store.dataset()
    assert dataset is not None
    kinds = {i.field_names[0]: i.index_type for i in dataset.describe_indices()}
    assert kinds["vector"].startswith("IVF_PQ") and kinds["search_text"] == "Inverted"
    assert dataset.count_rows() == store.open().count_rows() == 1500


@pytest.mark.parametrize("exact", [False, True], ids=["ann", "exact"])
@pytest.mark.parametrize("where", FILTERS, ids=["all", "session", "window", "scoped"])
def test_a_vector_search_gives_lancedb_s_rows_order_and_distances(
    store: ColdStore, where: str, exact: bool
) -> None:
    dataset, table = store.dataset(), store.open()
    for vector in queries():
        ours = cold_read.nearest(
            dataset,
            vector,
            COLUMNS,
            where,
            40,
            nprobes=NPROBES,
            refine_factor=REFINE_FACTOR,
            exact=exact,
        )
        theirs = lancedb_nearest(table, vector, where, 40, exact)
        assert ours.num_rows > 0
        assert ours["unit_id"].to_pylist() == theirs["unit_id"].to_pylist()
        np.testing.assert_allclose(
            ours["_distance"].to_numpy(), theirs["_distance"].to_numpy(), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("where", FILTERS, ids=["all", "session", "window", "scoped"])
@pytest.mark.parametrize("query", ["webhook retry", "token bucket limiter", "csv", "nothing"])
def test_a_full_text_search_gives_lancedb_s_rows_order_and_scores(
    store: ColdStore, where: str, query: str
) -> None:
    ours = cold_read.full_text(store.dataset(), query, "search_text", COLUMNS, where, 40)
    theirs = lancedb_full_text(store.open(), query, where, 40)
    assert (ours.num_rows > 0) == (query != "nothing")
    np.testing.assert_allclose(
        ours["_score"].to_numpy(), theirs["_score"].to_numpy(), rtol=1e-5, atol=1e-6
    )
    # rows of equal score come in any order (either library, from one run to the next): the
    # same rows at each score, but at the lowest, where the cut may take any of them
    assert tied(ours)[:-1] == tied(theirs)[:-1]
    assert ours["_score"].to_pylist() == sorted(ours["_score"].to_pylist(), reverse=True)


def tied(rows: Any) -> list[tuple[float, set[str]]]:
    """The rows' unit ids grouped by score (to 5 places), best first."""
    groups: dict[float, set[str]] = {}
    for score, unit_id in zip(rows["_score"].to_pylist(), rows["unit_id"].to_pylist(), strict=True):
        groups.setdefault(round(score, 5), set()).add(unit_id)
    return sorted(groups.items(), reverse=True)


@pytest.fixture(scope="module")
def exact_store(tmp_path_factory: pytest.TempPathFactory) -> ColdStore:
    """400 rows over 8 sessions and no vector index: its vector searches are exact."""
    store = ColdStore(tmp_path_factory.mktemp("cold-exact"), "test", DIM)
    made = units(400)
    rng = np.random.default_rng(4)
    vectors = [(v / np.linalg.norm(v)).astype("float32") for v in rng.normal(size=(400, DIM))]
    store.add(made, vectors, [""] * 400)
    store.maintain(ann_min_rows=10_000)
    return store


def test_a_reader_seeing_most_sessions_is_filtered_after_the_cut_with_the_same_rows(
    exact_store: ColdStore,
) -> None:
    """A reader who sees most of the table is searched unfiltered on ``_Wider``'s pool, and its
    rule keeps rows of that pool (Lance's filter first costs a mask of every row). Searched
    exactly, that gives the rows the filter applied first gives, in the same order at the same
    distances; a query whose pool keeps fewer than asked is searched again, filter first (both
    happen among these queries)."""
    dataset = exact_store.dataset()
    sessions, n = {f"s{i}" for i in range(6)}, 20
    filters = (None, None, None, None, sessions, "bob", set())
    where = _where(*filters)
    wider = _Wider.of(n, len(sessions) / 8, *filters)
    assert wider is not None and wider.rows > n
    assert _Wider.of(n, 0.75, "s1", *filters[1:]) is None  # selective
    assert _Wider.of(n, 0.4, *filters) is None  # a narrow reader
    kept = []
    for vector in np.random.default_rng(3).normal(size=(40, DIM)):
        query = (vector / np.linalg.norm(vector)).astype("float32")
        pool = _nearest(dataset, query, "", wider.rows, exact=False, columns=_Wider.JUDGED)
        kept.append(wider.kept(pool).num_rows >= n)
        first, after = (
            _vector_rows(dataset, query, where, n, ["unit_id", "session"], w) for w in (None, wider)
        )
        assert after.num_rows == first.num_rows == n
        assert set(after["session"].to_pylist()) <= sessions
        assert after["unit_id"].to_pylist() == first["unit_id"].to_pylist()
        assert after["_distance"].to_pylist() == first["_distance"].to_pylist()
    assert True in kept and False in kept  # each way was taken


def test_a_reader_seeing_most_sessions_searched_by_the_ann_index_gets_its_rows_only(
    store: ColdStore,
) -> None:
    """The same through the ANN index: as many rows as asked, never another session's, the
    wider pool taken (an approximate search either way: the rows may differ from those of the
    filter first, as two builds of the index may)."""
    dataset = store.dataset()
    sessions, n = {f"s{i}" for i in range(6)}, 20
    filters = (None, None, None, None, sessions, "bob", set())
    where, wider = _where(*filters), _Wider.of(n, len(sessions) / 8, *filters)
    assert wider is not None
    kept = []
    for vector in np.random.default_rng(3).normal(size=(40, DIM)):
        query = (vector / np.linalg.norm(vector)).astype("float32")
        pool = _nearest(dataset, query, "", wider.rows, exact=False, columns=_Wider.JUDGED)
        kept.append(wider.kept(pool).num_rows >= n)
        for searched in (None, wider):
            rows = _vector_rows(dataset, query, where, n, ["unit_id", "session"], searched)
            assert rows.num_rows == n and set(rows["session"].to_pylist()) <= sessions
    assert True in kept


@pytest.mark.parametrize("words", ["retry token", "csv export page", "login"])
def test_a_reader_seeing_most_sessions_is_filtered_after_a_full_text_cut(
    store: ColdStore, words: str
) -> None:
    """The same for full text: the rows kept of ``_Wider``'s unfiltered pool are the reader's,
    as many as asked, and those the filter applied first gives, at the same scores, but for the
    rows no index holds yet: scanned unfiltered they are scored by the whole table's
    statistics, not the filtered rows' (within a percent; rows at one score may trade places
    at the cut)."""
    dataset = store.dataset()
    sessions, n = {f"s{i}" for i in range(6)}, 30
    filters = (None, None, None, None, sessions, "bob", set())
    where, wider = _where(*filters), _Wider.of(n, len(sessions) / 8, *filters)
    assert wider is not None
    pool = cold_read.full_text(dataset, words, "search_text", _Wider.JUDGED, "", wider.rows)
    assert n <= wider.kept(pool).num_rows < pool.num_rows  # some were another reader's
    first, after = (
        _text_rows(dataset, words, where, n, ["unit_id", "session"], w) for w in (None, wider)
    )
    assert after.num_rows == first.num_rows == n
    assert set(after["session"].to_pylist()) <= sessions
    scores = dict(zip(first["unit_id"].to_pylist(), first["_score"].to_pylist(), strict=True))
    kept = zip(after["unit_id"].to_pylist(), after["_score"].to_pylist(), strict=True)
    shared = [(scores[u], score) for u, score in kept if u in scores]
    assert len(shared) >= 0.8 * n
    assert all(abs(a - b) <= 0.01 * a for a, b in shared)


def test_the_rows_fetched_by_unit_id_are_lancedb_s(store: ColdStore) -> None:
    wanted = ["s1:9:0", "s2:1002:0", "s7:1407:0"]  # an indexed row, and one not indexed yet
    where = f"unit_id IN ({', '.join(repr(u) for u in wanted)})"
    ours = cold_read.rows(store.dataset(), where, list(UNIT_FIELDS))
    theirs = store.open().search().where(where).select(list(UNIT_FIELDS)).to_list()
    assert sorted(ours, key=lambda r: r["unit_id"]) == sorted(theirs, key=lambda r: r["unit_id"])
    assert len(ours) == 3


def test_a_table_of_another_embedder_or_none_is_not_read(tmp_path: Path, store: ColdStore) -> None:
    assert ColdStore(store.directory, "other", DIM).dataset() is None
    assert ColdStore(tmp_path / "none", "test", DIM).dataset() is None


def test_upkeep_read_with_pylance_finds_nothing_due_when_lancedb_would_not(
    tmp_path: Path,
) -> None:
    """A table kept up is left as it is without opening it with lancedb; a table missing an
    index, or whose ANN index is due, is not."""
    made = units(200)
    vectors = [np.ones(DIM, "float32") / 4] * len(made)
    store = ColdStore(tmp_path, "test", DIM)
    store.add(made, list(vectors), [""] * len(made))
    fresh = ColdStore(tmp_path, "test", DIM)
    assert not fresh._kept_up(ann_min_rows=10_000)  # no index yet
    store.maintain(ann_min_rows=10_000)
    fresh = ColdStore(tmp_path, "test", DIM)
    assert fresh._kept_up(ann_min_rows=10_000)
    assert not fresh._kept_up(ann_min_rows=100)  # the ANN index is due
    assert fresh.maintain(ann_min_rows=10_000) is False and not fresh.is_open


def test_each_open_reads_the_latest_version(tmp_path: Path) -> None:
    """A reader (a server's searches: one ``dataset()`` a query, the Lance session shared)
    sees every row committed before it opened, as lancedb's ``read_consistency`` 0 did."""
    store, reader = ColdStore(tmp_path, "test", DIM), ColdStore(tmp_path, "test", DIM)
    made, vector = units(2), np.ones(DIM, "float32") / 4
    store.add(made[:1], [vector], [""])
    first = reader.dataset()
    store.add(made[1:], [vector], [""])
    second = reader.dataset()
    assert first is not None and second is not None
    assert (first.count_rows(), second.count_rows()) == (1, 2)
    assert second.version == first.version + 1


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> ColdStore:
    """A table below ``ann_min_rows`` (no vector index: every search is exact, answered from
    the vectors kept in memory), its scalar and full-text indexes built, a row without a vector
    and one with a zero vector among the others."""
    store = ColdStore(tmp_path_factory.mktemp("small"), "test", DIM)
    rng = np.random.default_rng(3)
    made = units(600)
    vectors: list[np.ndarray | None] = [
        (v / np.linalg.norm(v)).astype("float32") for v in rng.normal(size=(len(made), DIM))
    ]
    vectors[5], vectors[6] = None, np.zeros(DIM, "float32")
    store.add(made, vectors, [""] * len(made))
    store.maintain(ann_min_rows=10_000)
    return store


@pytest.mark.parametrize("exact", [False, True], ids=["asked-ann", "exact"])
@pytest.mark.parametrize("where", FILTERS, ids=["all", "session", "window", "scoped"])
def test_a_search_kept_in_memory_gives_lance_s_rows_order_and_distances(
    small: ColdStore, where: str, exact: bool
) -> None:
    """Without a vector index, the search over the kept vectors returns Lance's own exact
    search's rows (these random vectors have no exact ties), order and distances, under each
    filter, and only rows the filter keeps."""
    dataset, table = small.dataset(), small.open()
    assert dataset is not None
    assert not any("vector" in i.field_names for i in dataset.describe_indices())
    for vector in queries():
        ours = cold_read.nearest(
            dataset, vector, COLUMNS, where, 40, nprobes=1, refine_factor=1, exact=exact
        )
        assert cold_read._KEPT is not None and cold_read._KEPT.vectors is not None
        theirs = lancedb_nearest(table, vector, where, 40, exact=True)
        assert ours.num_rows > 0
        assert ours["unit_id"].to_pylist() == theirs["unit_id"].to_pylist()
        np.testing.assert_allclose(
            ours["_distance"].to_numpy(), theirs["_distance"].to_numpy(), rtol=1e-5, atol=1e-6
        )
        assert ours.column_names == [*COLUMNS, "_distance"]
        assert {"s5:5:0", "s6:6:0"}.isdisjoint(ours["unit_id"].to_pylist())
        if where:
            kept = set(dataset.to_table(columns=["unit_id"], filter=where)["unit_id"].to_pylist())
            assert set(ours["unit_id"].to_pylist()) <= kept


def test_a_scoped_search_kept_in_memory_never_returns_another_reader_s_rows(
    small: ColdStore,
) -> None:
    """A reader of sessions s1 and s2 gets rows of those sessions only, though the vectors of
    every session are kept, and the workspace's search still reaches the others."""
    dataset = small.dataset()
    scoped = _where(None, None, None, None, {"s1", "s2"}, "bob", set())
    for vector in queries():
        mine = cold_read.nearest(dataset, vector, COLUMNS, scoped, 200, **SEARCH)
        everyone = cold_read.nearest(dataset, vector, COLUMNS, "", 200, **SEARCH)
        assert {u.split(":")[0] for u in mine["unit_id"].to_pylist()} == {"s1", "s2"}
        assert len({u.split(":")[0] for u in everyone["unit_id"].to_pylist()}) == 8


SEARCH: dict[str, Any] = {"nprobes": 1, "refine_factor": 1, "exact": False}


def test_the_kept_vectors_are_read_again_after_a_write(tmp_path: Path) -> None:
    """A row added, then deleted, is found, then gone: each write makes a version the kept
    vectors are keyed on; a table made again (another epoch) is read afresh too."""
    store = ColdStore(tmp_path, "test", DIM)
    made, rng = units(50), np.random.default_rng(4)
    vectors = [(v / np.linalg.norm(v)).astype("float32") for v in rng.normal(size=(50, DIM))]
    store.add(made[:40], list(vectors[:40]), [""] * 40)
    query = vectors[45]

    def nearest() -> str:
        dataset = store.dataset()
        return str(cold_read.nearest(dataset, query, COLUMNS, "", 1, **SEARCH)["unit_id"][0])

    before = nearest()
    assert before != made[45].unit_id
    store.add(made[45:46], [vectors[45]], [""])
    assert nearest() == made[45].unit_id
    store.delete(f"unit_id = '{made[45].unit_id}'")
    assert nearest() == before
    store.create()
    store.add(made[45:46], [vectors[45]], [""])
    assert nearest() == made[45].unit_id


def test_rows_at_an_equal_distance_come_by_unit_id(tmp_path: Path) -> None:
    """Exact ties (the same vector) are ordered by unit id, whichever order they were
    written in, and the cut keeps the smallest ids."""
    store = ColdStore(tmp_path, "test", DIM)
    made = units(12)[::-1]
    vector = np.ones(DIM, "float32") / 4
    store.add(made, [vector] * len(made), [""] * len(made))
    found = cold_read.nearest(store.dataset(), vector, COLUMNS, "", 5, **SEARCH)
    assert found["unit_id"].to_pylist() == sorted(u.unit_id for u in made)[:5]

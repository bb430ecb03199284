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
from projections.recall import NPROBES, REFINE_FACTOR, _where
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

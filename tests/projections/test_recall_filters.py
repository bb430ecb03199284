"""A filtered search is filtered before its candidate pool is cut: with an ANN index, a time
window whose rows lie in partitions the query does not visit still gives its nearest rows."""

from __future__ import annotations

from pathlib import Path

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest
from lancedb.index import IvfPq

from projections.recall import _nearest, _vector_rows


@pytest.mark.slow
def test_a_time_window_far_from_the_query_still_fills_the_pool(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    dim, groups, per = 16, 64, 300  # 64 tight clusters: the query's is not the window's
    centers = rng.normal(size=(groups, dim))
    # the early cluster opposite the query's: the farthest partition, never among those probed
    # (a random one was among them in about one run in four, and the case then did not arise)
    centers[groups - 1] = -centers[0]
    vectors = np.concatenate([c + 0.05 * rng.normal(size=(per, dim)) for c in centers])
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype("float32")
    count = groups * per
    early = [i // per == groups - 1 for i in range(count)]  # only the last cluster is early
    written = lancedb.connect(tmp_path).create_table(
        "units",
        pa.table(
            {
                "unit_id": [f"u{i}" for i in range(count)],
                "ts": ["2026-01-01T00:00:00Z" if e else "2026-01-02T00:00:00Z" for e in early],
                "text": ["x"] * count,
                "kind": ["message"] * count,
                "type": ["user"] * count,
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
            }
        ),
    )
    written.create_index("vector", config=IvfPq(distance_type="cosine", num_partitions=64))
    table = lance.dataset(tmp_path / "units.lance")  # read as recall reads it: pylance
    query = (centers[0] / np.linalg.norm(centers[0])).astype("float32")
    until = "ts <= '2026-01-01T00:00:00Z'"
    assert _nearest(table, query, until, 20, exact=False).num_rows < 20  # the case at hand
    rows = _vector_rows(table, query, until, 20)
    assert rows.num_rows == 20
    assert set(rows["ts"].to_pylist()) == {"2026-01-01T00:00:00Z"}
    exact = _nearest(table, query, until, 20, exact=True)
    assert rows["unit_id"].to_pylist() == exact["unit_id"].to_pylist()


def test_a_filtered_search_returns_k_earlier_passages_when_they_exist(tmp_path: Path) -> None:
    """``until`` is applied before the candidate pools are cut: 120 later messages nearer the
    query than any earlier one fill neither pool, and the 12 earlier ones give 10 hits."""
    from airsspec.memory import Memory
    from airsspec.workspace import init_workspace

    init_workspace(tmp_path)
    # (session diversity off: unfiltered, the later session must fill the top 10)
    (tmp_path / "airsspec.toml").write_text('[cold]\nembedder = "hash"\nsession_diversity = 0\n')
    earlier = [
        {"type": "user", "content": f"note {i}: the rate limiter of the upload API", "ts": ts}
        for i, ts in enumerate(f"2026-01-01T00:00:{s:02d}Z" for s in range(12))
    ]
    later = [
        {
            "type": "user",
            "content": f"deploy {i}: the rate limiter of the upload API, rate limiter again",
            "ts": f"2026-02-01T00:{i // 60:02d}:{i % 60:02d}Z",
        }
        for i in range(120)
    ]
    with Memory.open(tmp_path) as memory:
        memory.append_many("early", earlier, project=False)
        memory.append_many("late", later, project=False)
        memory.project(["cold"])
        query = "rate limiter of the upload API"
        unfiltered = memory.search(query, k=10, fresh=False)["hits"]
        assert {hit["session"] for hit in unfiltered} == {"late"}  # the case at hand
        hits = memory.search(query, k=10, until="2026-01-15T00:00:00Z", fresh=False)["hits"]
    assert len(hits) == 10
    assert {hit["session"] for hit in hits} == {"early"}

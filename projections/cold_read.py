"""The cold tier's read path: its Lance table opened with pylance (``lance``), not lancedb.

lancedb writes the table (``projections.cold.ColdStore``); a search needs only to open the
dataset, run a vector search with the table's IVF-PQ index, a full-text search with its inverted
index, and fetch rows by a filter, which pylance does on the same files. Importing ``lancedb``
takes about a second of CPU (``lancedb.db`` imports lance_namespace's generated REST client:
hundreds of pydantic models), ``lance`` about a quarter of that with numpy and pyarrow, so a
command that only reads the tier (``airsspec search``, a context with a query) never imports
lancedb. Each search here asks exactly what ``recall`` asked through lancedb (the same filter,
prefiltered; the same probes and refine factor; the same full-text columns), and a test holds
the hits, their order and scores equal to lancedb's on the same table.

Invariants: a dataset is opened at its latest version (a reader sees every commit made before
it opened); one Lance session per process bounds the index and metadata caches as the writer's
does; Lance's failures are the caller's to degrade on (``recall`` answers from what works).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections.cold import _META_KEY, TABLE, lance_failed, lance_session

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


def _lance() -> Any:
    """pylance, imported on first use, its log lines kept off the terminal as lancedb's are
    (``projections.cold._lancedb``) unless ``LANCE_LOG`` asks for them."""
    os.environ.setdefault("LANCE_LOG", "error")
    import lance

    return lance


def open_dataset(
    directory: Path | str, embedder_id: str, storage_options: dict[str, str] | None = None
) -> Any | None:
    """The cold table under ``directory`` (a folder, or a bucket url reached with
    ``storage_options``) at its latest version, or None when it is missing, unreadable or made
    by another embedder than ``embedder_id``: what ``ColdStore.open`` decides, without
    lancedb. A local table whose folder does not exist is missing without importing Lance."""
    uri = f"{str(directory).rstrip('/')}/{TABLE}.lance"
    if isinstance(directory, Path) and not Path(uri).exists():
        return None
    lance = _lance()
    try:
        dataset = lance.dataset(
            uri, storage_options=storage_options or None, session=lance_session(lance)
        )
        info = json.loads(dataset.schema.metadata[_META_KEY])
    except BaseException as exc:  # missing, corrupt: lance raises many kinds, or panics
        if not lance_failed(exc):
            raise
        return None
    return dataset if info.get("embedder") == embedder_id else None


def nearest(
    dataset: Any,
    vector: np.ndarray,
    columns: list[str],
    where: str,
    n: int,
    *,
    nprobes: int,
    refine_factor: int,
    exact: bool,
) -> pa.Table:
    """The ``n`` nearest rows to ``vector`` by cosine among those ``where`` keeps (applied
    before the cut), with ``columns`` and ``_distance``. ``exact``: every kept row is compared,
    not the index's ``nprobes`` partitions (whose ``refine_factor * n`` PQ candidates get exact
    distances). One vector a search: Lance's batch query (several vectors in one scan) probes
    other partitions than each vector's own search does, so its hits differ. An exact search
    (asked, or a table without a vector index) of a table of at most ``MEMORY_ROWS`` rows is
    answered from its vectors kept in memory (``_exact_nearest``)."""
    kept = _kept_vectors(dataset, exact)
    if kept is not None:
        return _exact_nearest(dataset, kept, vector, columns, where, n)
    query: dict[str, Any] = {
        "column": "vector",
        "q": vector,
        "k": n,
        "metric": "cosine",
        "use_index": not exact,
    }
    if not exact:
        query.update(minimum_nprobes=nprobes, maximum_nprobes=nprobes, refine_factor=refine_factor)
    return dataset.to_table(
        nearest=query, columns=[*columns, "_distance"], filter=where or None, prefilter=bool(where)
    )


# A table of at most this many rows has its exact vector searches answered in memory (a 20k x 384
# float32 matrix is 30 MB); a bigger one is searched by Lance, read from its files each time.
MEMORY_ROWS = 50_000


@dataclass(frozen=True, slots=True)
class _Vectors:
    """A table version's vectors, unit length (float32, as Lance's cosine computes), the row id
    and unit id of each, and which rows have a vector at all."""

    matrix: np.ndarray
    row_ids: np.ndarray
    unit_ids: np.ndarray
    present: np.ndarray


@dataclass(slots=True)
class _Version:
    """What is kept of one version of the table (epoch, version): whether it has a vector
    index, whether it is small enough for memory, and its vectors once read."""

    key: tuple[str, bytes, int]  # the table's folder, its metadata (its epoch), its version
    indexed: bool
    fits: bool
    vectors: _Vectors | None = None


_KEPT: _Version | None = None
_KEEPING = threading.Lock()


def _kept_vectors(dataset: Any, exact: bool) -> _Vectors | None:
    """The vectors of ``dataset``'s version, read once and kept while the table's epoch and
    version are unchanged (every write makes a version; a rebuilt table has another epoch), or
    None when its searches are not answered in memory: an indexed table searched by its index
    (not ``exact``), or a table of more than ``MEMORY_ROWS`` rows."""
    global _KEPT
    key = (dataset.uri, (dataset.schema.metadata or {}).get(_META_KEY, b""), dataset.version)
    with _KEEPING:
        kept = _KEPT
        if kept is None or kept.key != key:
            indexed = any("vector" in i.field_names for i in dataset.describe_indices())
            kept = _KEPT = _Version(key, indexed, dataset.count_rows() <= MEMORY_ROWS)
        if not kept.fits or (kept.indexed and not exact):
            return None
        if kept.vectors is None:
            kept.vectors = _read_vectors(dataset)
        return kept.vectors


def _read_vectors(dataset: Any) -> _Vectors:
    """Every row's vector, made unit length, with its row id and unit id."""
    import numpy as np

    table = dataset.to_table(columns=["unit_id", "vector"], with_row_id=True)
    column = table["vector"].combine_chunks()
    dim = column.type.list_size
    values = column.values.slice(column.offset * dim, len(column) * dim)
    matrix = values.to_numpy(zero_copy_only=False).astype(np.float32)
    matrix = matrix.reshape(-1, dim) if len(column) else np.zeros((0, dim), np.float32)
    present = ~column.is_null().to_numpy(zero_copy_only=False)
    norms = np.linalg.norm(matrix, axis=1)
    present &= norms > 0  # cosine has no value for a zero vector
    matrix[present] /= norms[present, None]
    unit_ids = np.asarray(table["unit_id"].to_pylist(), dtype=object)
    return _Vectors(matrix, table["_rowid"].to_numpy(), unit_ids, present)


def _exact_nearest(
    dataset: Any, kept: _Vectors, vector: np.ndarray, columns: list[str], where: str, n: int
) -> pa.Table:
    """What Lance's exact search returns (``columns`` and ``_distance``, 1 - cosine, nearest
    first), computed over the kept vectors: the rows ``where`` keeps are Lance's answer to the
    filter (their row ids, from its scalar indexes), so a filter is applied exactly as Lance
    applies it. Ties at equal distance go to the smaller unit id."""
    import numpy as np
    import pyarrow as pa

    candidates = kept.present
    if where:
        allowed = dataset.to_table(columns=[], filter=where, with_row_id=True)["_rowid"]
        candidates = candidates & np.isin(kept.row_ids, allowed.to_numpy())
    indices = np.flatnonzero(candidates)
    query = np.asarray(vector, dtype=np.float32)
    norm = np.linalg.norm(query)
    if not len(indices) or n <= 0 or norm == 0:
        found = dataset._take_rows([], columns=columns)
        return found.append_column("_distance", pa.array([], pa.float32()))
    # Every row's distance, then the kept rows' (a copy of their vectors costs more); by
    # einsum, on this thread: OpenBLAS's matrix-vector product spreads over every core and
    # spends 5x the CPU (5 ms against 1 at 10k x 256, on 2 cores).
    distances = (np.float32(1) - np.einsum("ij,j->i", kept.matrix, query / norm))[indices]
    if len(indices) > n:  # the n nearest, and every row tied with the farthest of them
        cut = np.partition(distances, n - 1)[n - 1]
        near = np.flatnonzero(distances <= cut)
        indices, distances = indices[near], distances[near]
    order = sorted(range(len(indices)), key=lambda i: (distances[i], kept.unit_ids[indices[i]]))
    order = order[:n]
    row_ids = kept.row_ids[indices[order]]
    found = dataset._take_rows(pa.array(row_ids, pa.uint64()), columns=columns)
    return found.append_column("_distance", pa.array(distances[order], pa.float32()))


def full_text(
    dataset: Any, query: str, column: str, columns: list[str], where: str, n: int
) -> pa.Table:
    """The ``n`` best rows for ``query`` by BM25 over ``column`` (its inverted index, plus a
    scan of rows not indexed yet) among those ``where`` keeps, with ``columns`` and
    ``_score``. The filter applies before the cut: after it, the scan of the rows not indexed
    scores them by other statistics (BM25 scores differ by up to half a percent)."""
    return dataset.to_table(
        full_text_query={"query": query, "columns": [column]},
        columns=[*columns, "_score"],
        filter=where or None,
        prefilter=bool(where),
        limit=n,
    )


def rows(dataset: Any, where: str, columns: list[str]) -> list[dict[str, Any]]:
    """Every row ``where`` keeps, ``columns`` only (a filter on indexed columns: the scalar
    indexes answer it)."""
    return dataset.to_table(columns=columns, filter=where).to_pylist()

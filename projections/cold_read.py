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
    other partitions than each vector's own search does, so its hits differ."""
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


def full_text(
    dataset: Any, query: str, column: str, columns: list[str], where: str, n: int
) -> pa.Table:
    """The ``n`` best rows for ``query`` by BM25 over ``column`` (its inverted index, plus a
    scan of rows not indexed yet) among those ``where`` keeps, with ``columns`` and
    ``_score``."""
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

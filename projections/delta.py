"""The analytics copy of the log as a Delta table, and remote Parquet as pyarrow datasets.

The Delta table (``deltalake``) holds the rows of ``export_parquet`` (the columns of the
``events`` view, ``raw`` and ``session_date``), partitioned by ``session_date``, at
``{storage url}/analytics/events`` when the log is on a bucket (every machine reads the same
table), else under the workspace. Invariants:

- The table is its own checkpoint: the position exported for a session is the highest seq the
  table holds for it, read from the table's current version. ``export_delta`` appends only the
  records past those positions, so repeated exports add each record once.
- Each export is one Delta commit of a MERGE that inserts only the (session_date, session,
  seq) rows the table lacks: two machines exporting at once never double a record. A commit
  that loses to another writer (the store's conditional PUT of the next version refused) is
  retried from the new version.
- Readers read one committed version through ``DeltaTable.to_pyarrow_dataset``, a dataset
  pyarrow scans itself: DuckDB needs no ``httpfs`` extension to query a bucket.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventlog.errors import AirsspecError, UnavailableError

PARTITION = "session_date"
_KEY = ("session_date", "session", "seq")
_ATTEMPTS = 8  # commits lost to another exporter before giving up


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError as exc:
        raise UnavailableError(
            "the analytics table needs deltalake (pip install 'airsspec-memory[s3]')"
        ) from exc
    return deltalake


def _options(location: str | Path, storage_options: dict[str, str] | None) -> dict[str, str]:
    """Delta's options: the bucket's, with conditional PUT of commit files (``etag``), so
    two writers never both commit one version."""
    if isinstance(location, Path) or "://" not in location:
        return {}
    return {**(storage_options or {}), "aws_conditional_put": "etag"}


def open_table(location: str | Path, storage_options: dict[str, str] | None = None) -> Any:
    """The Delta table at ``location`` (its newest version), or None if there is none."""
    deltalake = _deltalake()
    options = _options(location, storage_options)
    try:
        if not deltalake.DeltaTable.is_deltatable(str(location), options):
            return None
        return deltalake.DeltaTable(str(location), storage_options=options)
    except (OSError, deltalake.exceptions.DeltaError) as exc:
        raise UnavailableError(f"{location}: the analytics table cannot be read: {exc}") from exc


def exported_positions(table: Any) -> dict[str, int]:
    """Session -> the highest seq the table holds (what was exported)."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.register("exported", table.to_pyarrow_dataset())
        rows = con.execute("SELECT session, max(seq) FROM exported GROUP BY session").fetchall()
    finally:
        con.close()
    return {session: seq for session, seq in rows}


def _log_ends(log_dir: Path) -> dict[str, int] | None:
    """Session -> its last seq, from each file's last record (None if one cannot be read:
    the caller then loads the log to find out)."""
    import os

    from eventlog.layout import list_sessions, open_nofollow, session_path
    from eventlog.recovery import inspect_tail

    ends = {}
    for session in list_sessions(log_dir):
        path = session_path(log_dir, session)
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            ends[session] = inspect_tail(fd, path, os.fstat(fd).st_size)[1].seq
        except (OSError, AirsspecError):
            return None
        finally:
            os.close(fd)
    return ends


def export_delta(
    log_dir: Path,
    location: str | Path,
    storage_options: dict[str, str] | None = None,
) -> int:
    """Append the records of the log (``log_dir``, the local layout) past the table's
    positions to the Delta table at ``location``; returns the records added."""
    from projections.analytics import Analytics, export_rows

    deltalake = _deltalake()
    options = _options(location, storage_options)
    table = open_table(location, storage_options)
    ends = _log_ends(log_dir)
    if table is not None and ends is not None:
        positions = exported_positions(table)
        if all(positions.get(s, 0) >= seq for s, seq in ends.items()):
            return 0  # up to date: the log need not be loaded
    analytics = Analytics(log_dir)
    try:
        for attempt in range(_ATTEMPTS):
            if attempt:
                table = open_table(location, storage_options)
            rows = export_rows(analytics, None if table is None else exported_positions(table))
            if rows.num_rows == 0:
                return 0
            try:
                if table is None:
                    if isinstance(location, Path):
                        location.mkdir(parents=True, exist_ok=True)
                    deltalake.write_deltalake(
                        str(location),
                        rows,
                        mode="append",
                        partition_by=[PARTITION],
                        storage_options=options,
                    )
                    return rows.num_rows
                added = (
                    table.merge(
                        rows,
                        predicate=" AND ".join(f"t.{k} = s.{k}" for k in _KEY),
                        source_alias="s",
                        target_alias="t",
                        merge_schema=True,  # a newer version's columns join the table
                    )
                    .when_not_matched_insert_all()
                    .execute()
                )
                return int(added["num_target_rows_inserted"])
            except deltalake.exceptions.CommitFailedError:
                continue  # another exporter committed first: read its version, merge again
            except (OSError, deltalake.exceptions.DeltaError) as exc:
                raise UnavailableError(
                    f"{location}: the analytics table could not be written: {exc}"
                ) from exc
        raise UnavailableError(f"{location}: lost {_ATTEMPTS} commits in a row to other writers")
    finally:
        analytics.close()


def delta_dataset(location: str | Path, storage_options: dict[str, str] | None = None) -> Any:
    """The table's newest version as a pyarrow dataset (None when there is no table)."""
    table = open_table(location, storage_options)
    return None if table is None else table.to_pyarrow_dataset()


def _s3_filesystem(storage_options: dict[str, str] | None) -> Any:
    """pyarrow's S3 file system from the object-store options (``aws_endpoint``, ...);
    absent ones default to the standard AWS variables."""
    from pyarrow import fs

    options = storage_options or {}
    kwargs: dict[str, Any] = {}
    endpoint = options.get("aws_endpoint")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs |= {"endpoint_override": host or scheme, "scheme": scheme if host else "https"}
    if options.get("aws_region"):
        kwargs["region"] = options["aws_region"]
    if options.get("aws_access_key_id"):
        kwargs["access_key"] = options["aws_access_key_id"]
        kwargs["secret_key"] = options.get("aws_secret_access_key")
    return fs.S3FileSystem(**kwargs)


def remote_parquet(url: str, storage_options: dict[str, str] | None = None) -> Any:
    """The Parquet files under ``url`` (``s3://bucket/prefix``, written by ``export
    parquet``) as one pyarrow dataset, partitioned as exported, columns unified across files."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    from pyarrow.lib import ArrowException

    from eventlog.errors import AnalyticsError

    if not url.startswith("s3://"):
        raise AnalyticsError(f"--parquet {url}: only s3:// urls and local folders are read")
    path = url.removeprefix("s3://").rstrip("/")
    try:
        found = ds.dataset(
            path,
            filesystem=_s3_filesystem(storage_options),
            format="parquet",
            partitioning="hive",
        )
        if not found.files:
            raise AnalyticsError(f"--parquet {url}: no Parquet files (run export parquet)")
        # An export by an older version lacks newer columns: the files' columns are unified.
        schemas = [found.schema, *(f.physical_schema for f in found.get_fragments())]
        return ds.dataset(
            path,
            schema=pa.unify_schemas(schemas),
            filesystem=found.filesystem,
            format="parquet",
            partitioning="hive",
        )
    except (OSError, ArrowException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AnalyticsError(f"--parquet {url}: cannot be read: {first}") from exc

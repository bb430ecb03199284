"""SQL analytics over the whole history, with DuckDB in-process.

Views (typed columns; times are UTC TIMESTAMPs):
- ``events``: every record, with a column for each field of any record type (derived from
  ``eventlog.schema``: envelope, message, action/observation, compaction, imported, sessions,
  learnings, documents), nested values as JSON, and ``tokens`` (from the token-count tier).
- ``records``: ``session``, ``seq`` and ``raw``, each record exactly as stored (JSON).
- ``sessions``: per session: records, messages, first/last time, tokens, tool calls, errors,
  compactions.
- ``tool_calls``: each action joined to the observation that answers it: tool, params, outcome,
  latency, error or not (unanswered actions have no outcome).
- ``compactions``: range, tokens before/after, summarizer, reason.

The source is the JSONL log, Parquet written by ``export_parquet`` (a local folder, or a remote
prefix such as ``s3://bucket/airsspec`` read through a pyarrow dataset), or the Delta table of
``projections.delta`` (a pyarrow dataset of its current version): the views are the same. A
dataset is scanned by pyarrow, so DuckDB needs no extension (``httpfs``) to read a bucket.

User SQL runs in a sandbox where writing is impossible, not merely filtered:
- JSONL: the log files a query needs (listed without following symbolic links) are loaded into
  in-memory tables first; then external access is turned off with no path allowed at all, and the
  configuration is locked. No statement can read or write any file after that; the worst a
  statement could do is change the in-memory copy, which vanishes with the connection.
- Parquet: only the Parquet files themselves are readable; the log is not. A dataset (a remote
  prefix, the Delta table) is read by pyarrow: DuckDB itself may read no file at all.
- In every mode a parser-level allow-list runs first: SELECT (WITH ..., FROM-first, VALUES) and
  EXPLAIN of one SELECT only; ``EXPLAIN ANALYZE`` of anything else is refused, as is everything
  that is not a query (COPY, ATTACH, SET, INSTALL, PRAGMA, CALL, CREATE ...).
"""

from __future__ import annotations

import errno
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import duckdb

from eventlog.errors import AnalyticsError, UnsafePathError
from eventlog.layout import list_sessions, session_path
from eventlog.schema import MESSAGE_TYPES, RECORD_TYPES, Record
from projections.scopes import Scope


def _sql_type(name: str, annotation: Any) -> str:
    """The DuckDB type of a record field: times are TIMESTAMPs, scalars keep their type, and
    whatever nests (objects, lists, models, any value) is JSON."""
    if name == "ts":
        return "TIMESTAMP"
    if isinstance(annotation, UnionType) or get_origin(annotation) is Union:
        present = [a for a in get_args(annotation) if a is not type(None)]
        annotation = present[0] if len(present) == 1 else Any
    if get_origin(annotation) is Annotated:  # a constrained value: its type is the first
        annotation = get_args(annotation)[0]
    if annotation is bool:
        return "BOOLEAN"
    if annotation is int:
        return "BIGINT"
    if annotation is float:
        return "DOUBLE"
    if annotation is str or get_origin(annotation) is Literal:
        return "VARCHAR"
    return "JSON"


def _event_columns() -> dict[str, str]:
    """One column per field of any record type (the log's schema, ``eventlog.schema``): the
    envelope's scalars, every type's own fields, then the envelope's JSON fields."""
    envelope = {name: _sql_type(name, f.annotation) for name, f in Record.model_fields.items()}
    columns = {name: kind for name, kind in envelope.items() if kind != "JSON"}
    for model in RECORD_TYPES.values():
        for name, field in model.model_fields.items():
            if name in envelope:
                continue
            kind = _sql_type(name, field.annotation)
            if columns.setdefault(name, kind) != kind:
                raise TypeError(f"field {name!r} is {columns[name]} in one type, {kind} in another")
    return columns | {name: kind for name, kind in envelope.items() if kind == "JSON"}


EVENT_COLUMNS: dict[str, str] = _event_columns()
VIEWS = ("events", "records", "sessions", "tool_calls", "compactions")
# The base tables each view reads (``raw_events``, ``records``, ``token_counts``).
_NEEDS: dict[str, set[str]] = {
    "raw_events": {"raw_events"},
    "records": {"records"},
    "token_counts": {"token_counts"},
    "events": {"raw_events", "token_counts"},
    "sessions": {"raw_events", "token_counts"},
    "tool_calls": {"raw_events"},
    "compactions": {"raw_events"},
}
_BASES = ("raw_events", "records", "token_counts")


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of a query."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


def _first_line(exc: Exception) -> str:
    """DuckDB's message without the query excerpt it appends on further lines."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def check_read_only(sql: str) -> list[str]:
    """The statements of ``sql`` if every one is a query; else raise ``AnalyticsError``.

    Allowed: a SELECT (with WITH, FROM-first or VALUES), and EXPLAIN (or EXPLAIN ANALYZE) of
    exactly one such SELECT. The type of what EXPLAIN explains is parsed, not guessed.
    """
    try:
        sql.encode()
    except UnicodeEncodeError as exc:  # bytes of a command line that are not UTF-8
        raise AnalyticsError(f"the query is not valid UTF-8: {exc.reason}") from exc
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise AnalyticsError(_first_line(exc)) from exc
    if not statements:
        raise AnalyticsError("no SQL statement given")
    for statement in statements:
        kind = statement.type
        if kind is duckdb.StatementType.EXPLAIN:
            kind = _explained_type(statement.query)
        if kind is not duckdb.StatementType.SELECT:
            raise AnalyticsError(
                f"only SELECT queries are allowed (got {kind.name}; the log is read-only)"
            )
    return [statement.query for statement in statements]


def _explained_type(query: str) -> duckdb.StatementType:
    """The type of the statement an ``EXPLAIN [ANALYZE]`` wraps."""
    words = [
        (start, query[start:].split(None, 1)[0].upper())
        for start, kind in duckdb.tokenize(query)
        if kind is not duckdb.token_type.comment
    ]
    position = 1
    if len(words) > 1 and words[1][1] == "ANALYZE":
        position = 2
    if len(words) <= position or words[position][1].startswith("("):
        return duckdb.StatementType.INVALID  # EXPLAIN (options) ...: not worth the risk
    try:
        inner = duckdb.extract_statements(query[words[position][0] :])
    except duckdb.Error:
        return duckdb.StatementType.INVALID
    return inner[0].type if len(inner) == 1 else duckdb.StatementType.MULTI


def tables_needed(sql: str) -> set[str]:
    """The base tables the views named in ``sql`` read (all of them if that cannot be told)."""
    try:
        names = duckdb.connect(":memory:").get_table_names(sql, qualified=False)
    except duckdb.Error:
        return set(_BASES)
    needed: set[str] = set()
    for name in names:
        needed |= _NEEDS.get(name.lower(), set())
    return needed


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns_sql() -> str:
    return "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in EVENT_COLUMNS.items()) + "}"


def _name(column: str) -> str:
    """A column name quoted as an identifier (a field may be a keyword: ``by``)."""
    return '"' + column.replace('"', '""') + '"'


def _empty_columns() -> str:
    return ", ".join(f"NULL::{t} AS {_name(k)}" for k, t in EVENT_COLUMNS.items())


def own_folder(folder: Path) -> None:
    """Make ``folder`` (and its parent) if missing; ``UnsafePathError`` when either is a
    symbolic link. DuckDB may read and write its temp folder even with external access off,
    so a link there (or one level up) would let SQL read whatever it points to."""
    for path in (folder.parent, folder):  # before making anything: never through a link
        if path.is_symlink():
            raise UnsafePathError(path)
    folder.mkdir(parents=True, exist_ok=True)


class Analytics:
    """The analytics views of one log (or of its Parquet export), sandboxed for user SQL.

    ``tables`` names the base tables to load (``tables_needed(sql)``; default: all).
    ``temp_dir`` is where DuckDB may spill (default: nowhere).
    """

    def __init__(
        self,
        log_dir: Path,
        tokens_dir: Path | None = None,
        parquet_source: str | None = None,
        *,
        tables: Collection[str] | None = None,
        temp_dir: Path | None = None,
        dataset: Any = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """``dataset``: a pyarrow dataset of exported rows (the Delta table) read instead of
        the log; ``storage_options`` reach a remote ``parquet_source`` (endpoint, keys)."""
        wanted = set(_BASES if tables is None else tables)
        self.skipped: list[str] = []  # damaged session files left out, with why
        self.parquet = parquet_source is not None
        if temp_dir is not None:
            own_folder(temp_dir)
        self.con = duckdb.connect(":memory:")
        self._storage_options = storage_options
        self.dataset = dataset
        try:
            self._build(log_dir, tokens_dir, parquet_source, wanted, temp_dir)
        except duckdb.Error as exc:
            self.con.close()
            raise AnalyticsError(_first_line(exc)) from exc

    def _build(
        self,
        log_dir: Path,
        tokens_dir: Path | None,
        parquet_source: str | None,
        wanted: set[str],
        temp_dir: Path | None,
    ) -> None:
        self.con.execute(f"SET temp_directory = {_quote(str(temp_dir) if temp_dir else '')}")
        readable: list[str] = []
        if self.dataset is not None:
            self._dataset_views(self.dataset)
        elif parquet_source is not None:
            readable += self._parquet_views(parquet_source)
        else:
            self._jsonl_tables(log_dir, wanted)
        self._token_table(tokens_dir, "token_counts" in wanted)
        self._derived_views()
        if readable:
            self.con.execute(f"SET allowed_paths = [{', '.join(map(_quote, readable))}]")
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    # ----------------------------------------------------------------- views

    def _readable(self, files: list[str]) -> list[str]:
        """``files`` without those DuckDB cannot read as JSONL (each named in ``skipped``),
        so one damaged session does not take the others' analytics down with it. Only run
        after reading them all together failed."""
        kept = []
        for name in files:
            try:
                self.con.execute(
                    f"SELECT count(*) FROM read_json({_quote(name)}, format = "
                    f"'newline_delimited', columns = {_columns_sql()})"
                ).fetchall()
                kept.append(name)
            except duckdb.Error as exc:
                self.skipped.append(f"{Path(name).name}: {_first_line(exc)}")
        return kept

    def _jsonl_tables(self, log_dir: Path, wanted: set[str]) -> None:
        files = [str(session_path(log_dir, s).resolve()) for s in list_sessions(log_dir)]
        try:
            self._load_jsonl(files, wanted)
        except duckdb.Error:
            self.con.execute("DROP TABLE IF EXISTS raw_events")
            self.con.execute("DROP TABLE IF EXISTS records")
            self._load_jsonl(self._readable(files), wanted)

    def _load_jsonl(self, files: list[str], wanted: set[str]) -> None:
        source = "[" + ", ".join(map(_quote, files)) + "]"
        if "raw_events" in wanted and files:
            self.con.execute(f"""CREATE TABLE raw_events AS SELECT * FROM read_json({source},
                format = 'newline_delimited', columns = {_columns_sql()})""")
        else:
            self.con.execute(f"CREATE TABLE raw_events AS SELECT {_empty_columns()} WHERE false")
        if "records" in wanted and files:
            self.con.execute(f"""CREATE TABLE records AS SELECT json ->> '$.session' AS session,
                (json ->> '$.seq')::BIGINT AS seq, json AS raw
                FROM read_ndjson_objects({source})""")
        else:
            self.con.execute(
                "CREATE TABLE records AS SELECT NULL::VARCHAR AS session, "
                "NULL::BIGINT AS seq, NULL::JSON AS raw WHERE false"
            )

    def _parquet_views(self, source: str) -> list[str]:
        """Views over the export; returns what the sandbox may read (those files only)."""
        source = source.removeprefix("file://")  # a local folder, whichever way it is named
        if "://" in source:
            from projections.delta import remote_parquet

            self._dataset_views(remote_parquet(source, self._storage_options))
            return []
        folder = Path(source)
        if not folder.is_dir():
            raise AnalyticsError(f"--parquet {source}: no such folder")
        readable = sorted(str(p.resolve()) for p in folder.rglob("*.parquet") if not p.is_symlink())
        if not readable:
            raise AnalyticsError(f"--parquet {source}: no Parquet files (run export parquet)")
        pattern = "[" + ", ".join(map(_quote, readable)) + "]"
        options = "hive_partitioning = true, union_by_name = true"
        self._export_views(f"read_parquet({pattern}, {options})")
        return readable

    def _dataset_views(self, dataset: Any) -> None:
        """Views over a pyarrow dataset of exported rows (scanned by pyarrow, not DuckDB)."""
        self.con.register("exported", dataset)
        self._export_views("exported")

    def _export_views(self, scan: str, where: str = "") -> None:
        """``raw_events`` and ``records`` over exported rows (``scan``), filtered by ``where``."""
        present = {row[0] for row in self.con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
        # An export by an older version lacks newer columns: they read as NULL.
        cols = ", ".join(
            _name(k) if k in present else f"NULL::{t} AS {_name(k)}"
            for k, t in EVENT_COLUMNS.items()
        )
        self.con.execute(f"CREATE OR REPLACE VIEW raw_events AS SELECT {cols} FROM {scan} {where}")
        self.con.execute(
            f"CREATE OR REPLACE VIEW records AS SELECT session, seq, raw FROM {scan} {where}"
        )

    def _token_table(self, tokens_dir: Path | None, wanted: bool) -> None:
        files = (
            sorted(str(p.resolve()) for p in tokens_dir.glob("*.parquet") if not p.is_symlink())
            if tokens_dir is not None and wanted
            else []
        )
        if files:
            source = "[" + ", ".join(map(_quote, files)) + "]"
            self.con.execute(
                f"CREATE TABLE token_counts AS SELECT session, seq, tokens "
                f"FROM read_parquet({source})"
            )
        else:
            self.con.execute(
                "CREATE TABLE token_counts AS SELECT NULL::VARCHAR AS session, "
                "NULL::BIGINT AS seq, NULL::BIGINT AS tokens WHERE false"
            )

    def _derived_views(self) -> None:
        messages = ", ".join(map(_quote, MESSAGE_TYPES))
        # The owner is the first session_started naming any scope field (projections.scopes).
        named = " OR ".join(f"{_name(n)} IS NOT NULL" for n in Scope.names())
        owner = "".join(
            f"arg_min({_name(n)}, seq) FILTER (WHERE type = 'session_started' AND ({named})) "
            f"AS {_name(n)}, "
            for n in Scope.names()
        )
        self.con.execute("""CREATE VIEW events AS SELECT e.*, t.tokens
            FROM raw_events e LEFT JOIN token_counts t USING (session, seq)""")
        self.con.execute(f"""CREATE VIEW sessions AS SELECT session, {owner}
            count(*) AS records,
            count(*) FILTER (WHERE type IN ({messages})) AS messages,
            min(ts) AS first_ts, max(ts) AS last_ts,
            sum(tokens) AS tokens,
            count(*) FILTER (WHERE type = 'action') AS tool_calls,
            count(*) FILTER (WHERE type = 'observation' AND is_error) AS errors,
            count(*) FILTER (WHERE type = 'compaction') AS compactions
            FROM events GROUP BY session""")
        self.con.execute("""CREATE VIEW tool_calls AS SELECT a.session, a.seq, a.id, a.tool,
            a.params, a.ts AS started, o.seq AS observation_seq, o.ts AS finished,
            o.result, o.is_error, o.id IS NOT NULL AS answered,
            epoch(o.ts) - epoch(a.ts) AS latency_s
            FROM raw_events a LEFT JOIN raw_events o
              ON o.type = 'observation' AND o.action_id = a.id AND o.session = a.session
            WHERE a.type = 'action'""")
        self.con.execute("""CREATE VIEW compactions AS SELECT session, seq, ts, library_no,
            from_seq, to_seq, messages, tokens_before, tokens_after, summary_tokens,
            summarizer ->> '$.backend' AS backend, summarizer ->> '$.model' AS model,
            summarizer ->> '$.fallback_from' AS fallback_from, reason
            FROM raw_events WHERE type = 'compaction'""")

    def restrict(self, sessions: Collection[str]) -> None:
        """Keep only ``sessions`` in every table (a reader scope's: ``Memory.analytics``).
        A Parquet export holds every session and is read in place, so it is refused; the
        Delta table is scanned filtered instead."""
        if self.parquet:
            raise AnalyticsError(
                "a scoped reader cannot query a Parquet export (it holds every session); "
                "query the log instead"
            )
        allowed = ", ".join(map(_quote, sorted(sessions)))
        kept = f"WHERE session IN ({allowed or 'NULL'})"
        try:
            if self.dataset is not None:
                # the shared table's rows are the reader's only under every name a query
                # could give them: the registered scan itself is replaced, not only its views
                import pyarrow.compute as pc

                self.con.unregister("exported")
                readable = pc.field("session").isin(sorted(sessions))
                self.con.register("exported", self.dataset.filter(readable))
                self._export_views("exported")
            # a table made anew, not deleted from: the rows left out stay in no storage
            # (DuckDB's column statistics, read by ``pragma_storage_info``, keep deleted ones)
            for table in _BASES if self.dataset is None else ("token_counts",):
                self.con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM {table} {kept}")
        except duckdb.Error as exc:
            raise AnalyticsError(_first_line(exc)) from exc

    # ----------------------------------------------------------------- queries

    def query(self, sql: str) -> QueryResult:
        """Run read-only SQL; raise ``AnalyticsError`` for anything else."""
        statements = check_read_only(sql)
        try:
            result = None
            for statement in statements:
                result = self.con.execute(statement)
            assert result is not None
            columns = [d[0] for d in result.description or []]
            return QueryResult(columns, result.fetchall())
        except duckdb.Error as exc:
            raise AnalyticsError(_first_line(exc)) from exc

    def close(self) -> None:
        """Close the connection (and with it the in-memory copy)."""
        self.con.close()


def export_rows(analytics: Analytics, after: dict[str, int] | None = None) -> Any:
    """The rows an export holds (an Arrow table): the columns of ``events`` plus ``raw`` and
    ``session_date`` (the UTC date of the session's first record), in (session, seq) order;
    with ``after`` (session -> seq), only the records past those positions."""
    past = ""
    if after:
        analytics.con.register("exported_to", _positions_table(after))
        past = "LEFT JOIN exported_to p USING (session) WHERE e.seq > coalesce(p.seq, 0)"
    return analytics.con.sql(f"""SELECT e.* FROM (SELECT e.*, r.raw,
        strftime(min(e.ts) OVER (PARTITION BY e.session), '%Y-%m-%d') AS session_date
        FROM raw_events e JOIN records r USING (session, seq)) e {past}
        ORDER BY e.session, e.seq""").to_arrow_table()


def _positions_table(after: dict[str, int]) -> Any:
    import pyarrow as pa

    return pa.table({"session": list(after), "seq": list(after.values())})


def export_parquet(log_dir: Path, tokens_dir: Path | None, out_dir: Path) -> int:
    """Write the log as Parquet partitioned by session date (the UTC date of each session's first
    record), with the columns of ``events`` plus ``raw``. Returns the records written."""
    out = out_dir.resolve()
    contexts = log_dir.resolve().parent
    if out == contexts or contexts in out.parents:
        raise AnalyticsError(f"{out_dir}: inside the log's folder; export somewhere else")
    analytics = Analytics(log_dir, tokens_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")  # a writable connection, separate from the sandbox
    try:
        table = export_rows(analytics)
        con.register("exported", table)
        try:
            con.execute(
                f"COPY exported TO {_quote(str(out_dir.resolve()))} (FORMAT parquet, "
                "PARTITION_BY (session_date), OVERWRITE_OR_IGNORE true)"
            )
        except duckdb.IOException as exc:  # disk full, file too large: the machine refused
            reason = f"the export could not be written: {exc}"
            raise OSError(errno.EIO, reason, str(out_dir)) from exc
        return table.num_rows
    finally:
        con.close()
        analytics.close()

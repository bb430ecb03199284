"""SQL analytics over the whole history, with DuckDB in-process.

Views (typed columns; times are UTC TIMESTAMPs):
- ``events``: every record: envelope, message fields, action/observation fields, compaction
  fields, ``meta`` and ``origin`` as JSON, and ``tokens`` (from the token-count tier).
- ``records``: ``session``, ``seq`` and ``raw``, each record exactly as stored (JSON).
- ``sessions``: per session: records, messages, first/last time, tokens, tool calls, errors,
  compactions.
- ``tool_calls``: each action joined to the observation that answers it: tool, params, outcome,
  latency, error or not (unanswered actions have no outcome).
- ``compactions``: range, tokens before/after, summarizer, reason.

The source is the JSONL log, or Parquet written by ``export_parquet`` (a local folder or a remote
prefix such as ``s3://bucket/airsspec`` through DuckDB's own support): the views are the same.
Queries are read-only: only SELECT (and EXPLAIN) statements run, file access is limited to the
workspace's folders, and the configuration is locked, so nothing written through SQL can reach
the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

EVENT_COLUMNS: dict[str, str] = {
    "v": "INTEGER",
    "id": "VARCHAR",
    "session": "VARCHAR",
    "seq": "BIGINT",
    "ts": "TIMESTAMP",
    "type": "VARCHAR",
    "prev": "VARCHAR",
    "hash": "VARCHAR",
    "content": "VARCHAR",
    "tool": "VARCHAR",
    "params": "JSON",
    "result": "JSON",
    "action_id": "VARCHAR",
    "is_error": "BOOLEAN",
    "kind": "VARCHAR",
    "text": "VARCHAR",
    "library_no": "BIGINT",
    "from_seq": "BIGINT",
    "to_seq": "BIGINT",
    "messages": "BIGINT",
    "tokens_before": "BIGINT",
    "tokens_after": "BIGINT",
    "summary_tokens": "BIGINT",
    "summarizer": "JSON",
    "reason": "VARCHAR",
    "meta": "JSON",
    "origin": "JSON",
}
MESSAGE_TYPES = ("user", "assistant", "thought", "action", "observation")
_ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


class AnalyticsError(Exception):
    """A query that cannot run: not read-only, or invalid SQL."""


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _columns_sql() -> str:
    return "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in EVENT_COLUMNS.items()) + "}"


class Analytics:
    def __init__(
        self, log_dir: Path, tokens_dir: Path | None = None, parquet_source: str | None = None
    ) -> None:
        self.con = duckdb.connect(":memory:")
        allowed: list[str] = []
        if parquet_source is not None:
            self._parquet_views(parquet_source)
            if "://" not in parquet_source:
                allowed.append(str(Path(parquet_source).resolve()) + "/")
        else:
            self._jsonl_views(log_dir)
            allowed.append(str(log_dir.resolve()) + "/")
        self._token_view(tokens_dir)
        if tokens_dir is not None:
            allowed.append(str(tokens_dir.resolve()) + "/")
        self._derived_views()
        self.con.execute(f"SET allowed_directories = [{', '.join(map(_quote, allowed))}]")
        if parquet_source is None or "://" not in parquet_source:
            self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    # ----------------------------------------------------------------- views

    def _jsonl_views(self, log_dir: Path) -> None:
        pattern = str(log_dir.resolve() / "*.jsonl")
        if not any(log_dir.glob("*.jsonl")):
            cols = ", ".join(f"NULL::{t} AS {k}" for k, t in EVENT_COLUMNS.items())
            self.con.execute(f"CREATE VIEW raw_events AS SELECT {cols} WHERE false")
            self.con.execute(
                "CREATE VIEW records AS SELECT NULL::VARCHAR AS session, "
                "NULL::BIGINT AS seq, NULL::JSON AS raw WHERE false"
            )
            return
        self.con.execute(f"""CREATE VIEW raw_events AS SELECT * FROM read_json({_quote(pattern)},
            format = 'newline_delimited', columns = {_columns_sql()})""")
        self.con.execute(f"""CREATE VIEW records AS SELECT json ->> '$.session' AS session,
            (json ->> '$.seq')::BIGINT AS seq, json AS raw
            FROM read_ndjson_objects({_quote(pattern)})""")

    def _parquet_views(self, source: str) -> None:
        pattern = source.rstrip("/") + "/**/*.parquet"
        cols = ", ".join(EVENT_COLUMNS)
        self.con.execute(f"""CREATE VIEW raw_events AS SELECT {cols} FROM read_parquet(
            {_quote(pattern)}, hive_partitioning = true, union_by_name = true)""")
        self.con.execute(f"""CREATE VIEW records AS SELECT session, seq, raw FROM read_parquet(
            {_quote(pattern)}, hive_partitioning = true, union_by_name = true)""")

    def _token_view(self, tokens_dir: Path | None) -> None:
        if tokens_dir is not None and any(tokens_dir.glob("*.parquet")):
            pattern = str(tokens_dir.resolve() / "*.parquet")
            self.con.execute(
                f"CREATE VIEW token_counts AS SELECT session, seq, tokens "
                f"FROM read_parquet({_quote(pattern)})"
            )
        else:
            self.con.execute(
                "CREATE VIEW token_counts AS SELECT NULL::VARCHAR AS session, "
                "NULL::BIGINT AS seq, NULL::BIGINT AS tokens WHERE false"
            )

    def _derived_views(self) -> None:
        messages = ", ".join(map(_quote, MESSAGE_TYPES))
        self.con.execute("""CREATE VIEW events AS SELECT e.*, t.tokens
            FROM raw_events e LEFT JOIN token_counts t USING (session, seq)""")
        self.con.execute(f"""CREATE VIEW sessions AS SELECT session,
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

    # ----------------------------------------------------------------- queries

    def query(self, sql: str) -> QueryResult:
        """Run read-only SQL; raise ``AnalyticsError`` for anything else."""
        try:
            statements = self.con.extract_statements(sql)
        except duckdb.Error as exc:
            raise AnalyticsError(str(exc)) from exc
        if not statements:
            raise AnalyticsError("no SQL statement given")
        for statement in statements:
            if statement.type not in _ALLOWED:
                raise AnalyticsError(
                    f"only SELECT queries are allowed (got {statement.type.name};"
                    " the log is read-only)"
                )
        try:
            result = None
            for statement in statements:
                result = self.con.execute(statement)
            assert result is not None
            columns = [d[0] for d in result.description or []]
            return QueryResult(columns, result.fetchall())
        except duckdb.Error as exc:
            raise AnalyticsError(str(exc)) from exc

    def close(self) -> None:
        self.con.close()


def export_parquet(log_dir: Path, tokens_dir: Path | None, out_dir: Path) -> int:
    """Write the log as Parquet partitioned by session date (the UTC date of each session's first
    record), with the columns of ``events`` plus ``raw``. Returns the records written."""
    analytics = Analytics(log_dir, tokens_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")  # a writable connection, separate from the sandbox
    try:
        table = analytics.con.sql("""SELECT e.*, r.raw,
            strftime(min(e.ts) OVER (PARTITION BY e.session), '%Y-%m-%d') AS session_date
            FROM raw_events e JOIN records r USING (session, seq)
            ORDER BY e.session, e.seq""").to_arrow_table()
        con.register("exported", table)
        con.execute(
            f"COPY exported TO {_quote(str(out_dir.resolve()))} (FORMAT parquet, "
            "PARTITION_BY (session_date), OVERWRITE_OR_IGNORE true)"
        )
        return table.num_rows
    finally:
        con.close()
        analytics.close()

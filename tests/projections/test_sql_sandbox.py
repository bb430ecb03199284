"""User SQL cannot write anything or read outside the log: every bypass found so far (EXPLAIN
ANALYZE COPY over the log, file reads, Parquet mode) fails, and generated write statements,
however wrapped, leave the workspace byte-identical."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airsspec.workspace import Workspace, init_workspace
from eventlog.errors import AnalyticsError
from eventlog.verify import verify
from projections.analytics import Analytics, check_read_only, export_parquet
from tests.conftest import snapshot
from tests.support.cli import run_cli


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sandbox")
    init_workspace(root)
    with Workspace.open(config=root / "airsspec.toml") as ws:
        ws.log.append_many("s1", [{"type": "user", "content": f"m{i}"} for i in range(3)])
        export_parquet(ws.log_dir, None, root / "parquet")
        ws.analytics().close()  # token counts and the spill folder exist before any snapshot
    (root / "outside.txt").write_text("outside the workspace\n")
    return root


def _log_file(project: Path) -> Path:
    return project / ".airsspec" / "contexts" / "agent" / "s1.jsonl"


def _copy_to(target: Path) -> str:
    return (
        "EXPLAIN ANALYZE COPY (SELECT raw::VARCHAR FROM records WHERE session='s1' AND seq=1) "
        f"TO '{target}' (FORMAT csv, HEADER false, QUOTE e'\\x02', DELIMITER e'\\x01', "
        "ESCAPE e'\\x02', USE_TMP_FILE false)"
    )


def test_explain_analyze_copy_cannot_rewrite_the_log(project: Path) -> None:
    before = snapshot(project)
    for extra in ([], ["--parquet", str(project / "parquet")]):
        result = run_cli("sql", *extra, _copy_to(_log_file(project)), cwd=project)
        assert result.returncode == 2
        assert b"only SELECT queries are allowed (got COPY" in result.stderr
        assert b"Traceback" not in result.stderr
    assert snapshot(project) == before
    with Workspace.open(config=project / "airsspec.toml") as ws:
        assert verify(ws.log).records == 3


@pytest.mark.parametrize("parquet", [None, "{dir}", "file://{dir}"])
def test_even_an_allowed_statement_cannot_touch_a_file(project: Path, parquet: str | None) -> None:
    """Below the allow-list: the engine itself refuses file access (the list is not all)."""
    source = parquet.format(dir=project / "parquet") if parquet else None
    with Workspace.open(config=project / "airsspec.toml") as ws:
        analytics = Analytics(ws.log_dir, None, source)
    before = snapshot(project)
    try:
        con = analytics.con  # straight to DuckDB, as a filter bug would let a statement through
        for statement in (
            f"COPY (SELECT 1) TO '{_log_file(project)}' (FORMAT csv, USE_TMP_FILE false)",
            f"COPY (SELECT 1) TO '{project / 'new.csv'}'",
            f"SELECT * FROM read_text('{project / 'outside.txt'}')",
            "SELECT * FROM read_text('/etc/passwd')",
            f"ATTACH '{project / 'x.duckdb'}'",
            "SET enable_external_access = true",
        ):
            with pytest.raises(Exception) as caught:
                con.execute(statement)
            assert "Permission" in str(caught.value) or "locked" in str(caught.value)
    finally:
        analytics.close()
    assert snapshot(project) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_json('{log}')",
        "SELECT * FROM read_text('{outside}')",
    ],
)
def test_no_file_outside_the_views_can_be_read(project: Path, sql: str) -> None:
    sql = sql.format(log=_log_file(project), outside=project / "outside.txt")
    parquet = project / "parquet"
    for extra in ([], ["--parquet", str(parquet)], ["--parquet", f"file://{parquet}"]):
        result = run_cli("sql", *extra, sql, cwd=project)
        assert result.returncode == 2, result.stdout
        assert b"disabled by configuration" in result.stderr
        assert result.stderr.count(b"\n") == 1  # one line, no query excerpt, no traceback


@pytest.mark.parametrize("form", ["{dir}", "file://{dir}"])
def test_parquet_answers_like_the_log(project: Path, form: str) -> None:
    source = form.format(dir=project / "parquet")
    sql = "SELECT session, seq, content FROM events ORDER BY seq"
    result = run_cli("sql", "--parquet", source, sql, "--format", "json", cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == run_cli("sql", sql, "--format", "json", cwd=project).stdout


def test_queries_and_explain_of_queries_still_run(project: Path) -> None:
    for sql in (
        "SELECT count(*) FROM events",
        "/* c */ WITH x AS (SELECT * FROM records) SELECT count(*) FROM x",
        "FROM sessions SELECT records",
        "EXPLAIN SELECT * FROM tool_calls",
        "-- why\nEXPLAIN ANALYZE SELECT count(*) FROM compactions",
    ):
        result = run_cli("sql", sql, "--format", "json", cwd=project)
        assert result.returncode == 0, (sql, result.stderr)


WRITES = st.sampled_from(
    [
        "COPY (SELECT 1) TO '{t}'",
        "COPY records TO '{t}' (FORMAT csv, USE_TMP_FILE false)",
        "COPY (SELECT raw FROM records) TO '{t}' (FORMAT json)",
        "EXPORT DATABASE '{d}'",
        "ATTACH '{t}' AS x",
        "CREATE TABLE t AS SELECT 1",
        "INSERT INTO records VALUES ('s1', 9, '{{}}')",
        "DELETE FROM records",
        "UPDATE records SET seq = 0",
        "DROP VIEW events",
        "SET enable_external_access = true",
        "PRAGMA enable_profiling",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CALL pragma_version()",
        "CHECKPOINT",
        "VACUUM",
    ]
)
WRAPS = st.sampled_from(
    [
        "{w}",
        "EXPLAIN {w}",
        "EXPLAIN ANALYZE {w}",
        "explain analyze {w}",
        "/* note */ EXPLAIN /* x */ ANALYZE {w}",
        "-- note\n{w}",
        "SELECT 1; {w}",
        "WITH q AS (SELECT 1) {w}",
        "EXPLAIN (FORMAT json) {w}",
        "{w}; SELECT 1",
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(write=WRITES, wrap=WRAPS, target=st.sampled_from(["log", "new", "outside"]))
def test_generated_writes_leave_the_workspace_byte_identical(
    project: Path, write: str, wrap: str, target: str
) -> None:
    path = {
        "log": _log_file(project),
        "new": project / ".airsspec" / "state" / "x.csv",
        "outside": project / "outside.txt",
    }[target]
    sql = wrap.format(w=write.format(t=path, d=project / "dump"))
    before = snapshot(project)
    with pytest.raises(AnalyticsError):
        check_read_only(sql)
    with Workspace.open(config=project / "airsspec.toml") as ws:
        analytics = ws.analytics(sql=sql)
        try:
            with pytest.raises(AnalyticsError):
                analytics.query(sql)
        finally:
            analytics.close()
    assert snapshot(project) == before

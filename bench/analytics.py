"""Analytics on a 1,000,000-record workspace (100 sessions): the ``sessions`` and ``tool_calls``
view queries over JSONL, the Parquet export, and the same queries over Parquet.

Token counts are left out here (they are the token tier's one-time cost, measured separately): the
views read only the log.

    python bench/analytics.py [--records N] [--repeats R]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median_seconds, print_table, write_synthetic_log
from projections.analytics import Analytics, export_parquet

QUERIES = {
    "sessions": "SELECT * FROM sessions ORDER BY session",
    "tool_calls": "SELECT tool, count(*), avg(latency_s), count(*) FILTER (WHERE is_error) "
    "FROM tool_calls GROUP BY tool",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="airsspec-bench-sql-"))
    try:
        log_dir = root / "log"
        write_synthetic_log(
            log_dir,
            100,
            args.records // 100,
            "Ran the tests again; two failures remain in test_refresh.",
        )
        jsonl = Analytics(log_dir)
        export_s = median_seconds(lambda: export_parquet(log_dir, None, root / "parquet"), 1)
        parquet = Analytics(log_dir, parquet_source=str(root / "parquet"))
        rows = []
        for name, sql in QUERIES.items():
            a = median_seconds(lambda sql=sql: jsonl.query(sql), args.repeats)
            b = median_seconds(lambda sql=sql: parquet.query(sql), args.repeats)
            assert sorted(jsonl.query(sql).rows) == sorted(parquet.query(sql).rows)
            rows.append([name, f"{a:.3f}", f"{b:.3f}", f"{a / b:.1f}x", "1.000"])
        print_table(
            f"View queries on {args.records:,} records, seconds (median of {args.repeats})",
            ["view", "JSONL", "Parquet", "Parquet speed-up", "target (JSONL)"],
            rows,
        )
        size = sum(p.stat().st_size for p in (root / "parquet").rglob("*.parquet"))
        log_size = sum(p.stat().st_size for p in log_dir.glob("*.jsonl"))
        print_table(
            "Parquet export",
            ["records", "seconds", "records/s", "JSONL MB", "Parquet MB"],
            [
                [
                    args.records,
                    f"{export_s:.2f}",
                    args.records / export_s,
                    f"{log_size / 1e6:.0f}",
                    f"{size / 1e6:.0f}",
                ]
            ],
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""SQL over the log: sql, report."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from airsspec.cli.common import EXIT_OK, arg, command, open_memory
from airsspec.memory import REPORTS, plot_format, plot_report, printable

if TYPE_CHECKING:
    from airsspec.memory import QueryResult


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _shown(value: Any) -> str:
    """A table cell as a person sees it (``printable``); csv and json keep exact values."""
    return printable(_cell(value))


def _print_result(result: QueryResult, fmt: str) -> None:
    if fmt == "json":
        rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        sys.stdout.write(
            orjson.dumps(rows, default=str, option=orjson.OPT_INDENT_2).decode() + "\n"
        )
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(result.columns)
        writer.writerows([[_cell(v) for v in row] for row in result.rows])
    else:
        cells = [result.columns] + [[_shown(v) for v in row] for row in result.rows]
        widths = [min(60, max(len(r[i]) for r in cells)) for i in range(len(result.columns))]
        for n, row in enumerate(cells):
            print("  ".join(c[:60].ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if n == 0:
                print("  ".join("-" * w for w in widths))
        print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")


@command(
    "sql",
    arg("query", help="SELECT ..."),
    arg("--format", choices=("table", "csv", "json"), default="table"),
    arg(
        "--parquet",
        metavar="DIR|URL",
        help="query Parquet written by 'export parquet' instead of the JSONL log",
    ),
)
def cmd_sql(args: argparse.Namespace) -> int:
    """Run read-only SQL over the log. The views are events, records, sessions, tool_calls and
    compactions."""
    with open_memory(args) as memory:
        result, skipped = memory.sql(args.query, parquet=args.parquet)  # read-only, or refused
    for left_out in skipped:
        print(f"airsspec: warning: left out {left_out}", file=sys.stderr)
    _print_result(result, "json" if args.json else args.format)
    return EXIT_OK


@command(
    "report",
    arg("name", choices=sorted(REPORTS)),
    arg(
        "--plot",
        metavar="FILE.png",
        help="also draw the report as a chart (.png, .svg or .pdf, as the extension says)",
    ),
    arg("--parquet", metavar="DIR|URL", help="read exported Parquet instead"),
)
def cmd_report(args: argparse.Namespace) -> int:
    """Print a named report. Reports: tools (error rates, latency), sessions, tokens (per session
    per day)."""
    if args.plot:
        plot_format(Path(args.plot))  # a name no chart can take is refused before any work
    with open_memory(args) as memory:
        result = memory.report(args.name, parquet=args.parquet)
    _print_result(result, "json" if args.json else "table")
    if args.plot:
        plot_report(args.name, result, Path(args.plot))
        print(f"chart written to {args.plot}", file=sys.stderr)
    return EXIT_OK

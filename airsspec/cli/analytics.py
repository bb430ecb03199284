"""SQL over the log: sql, report."""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from airsspec.cli.common import arg, command, open_memory, output_path
from airsspec.errors import EXIT_OK
from airsspec.memory import REPORTS, plot_format, plot_report, printable

if TYPE_CHECKING:
    from airsspec.memory import QueryResult


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _shown(value: Any) -> str:
    """A table cell as a person sees it (``printable``; a fraction to two decimals, a time to
    the second); csv and json keep exact values."""
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return printable(_cell(value))


def _numeric(values: list[Any]) -> bool:
    """Whether a column holds numbers only (shown right-aligned)."""
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in present
    )


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
        right = [_numeric([row[i] for row in result.rows]) for i in range(len(result.columns))]
        for n, row in enumerate(cells):
            shown = [
                c[:60].rjust(w) if r else c[:60].ljust(w)
                for c, w, r in zip(row, widths, right, strict=True)
            ]
            print("  ".join(shown).rstrip())
            if n == 0:
                print("  ".join("-" * w for w in widths))
        print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")


def _parquet(help: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """``--parquet DIR|URL``: the command reads Parquet written by ``export parquet`` (a
    folder or a bucket's URL) instead of the log; ``help`` says so in its own words."""
    return arg("--parquet", metavar="DIR|URL", help=help)


@command(
    "sql",
    arg("query", help="SELECT ..."),
    arg("--format", choices=("table", "csv", "json"), default="table"),
    _parquet("query Parquet written by 'export parquet' instead of the JSONL log"),
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
    _parquet("read exported Parquet instead"),
)
def cmd_report(args: argparse.Namespace) -> int:
    """Print a named report. Reports: tools (error rates, latency), sessions, tokens (per session
    per day)."""
    if args.plot:
        plot_format(Path(args.plot))  # a name no chart can take is refused before any work
    with open_memory(args) as memory:
        if args.plot:  # out of the workspace, as every output file is
            output_path(memory, args.plot, "--plot")
        result = memory.report(args.name, parquet=args.parquet)
    _print_result(result, "json" if args.json else "table")
    if args.plot:
        plot_report(args.name, result, Path(args.plot))
        print(f"chart written to {args.plot}", file=sys.stderr)
    return EXIT_OK

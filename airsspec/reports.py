"""Named reports over the analytics views, as tables and, where a picture says more, PNG charts.

- ``tools``: calls, errors, error rate, latency and unanswered calls per tool.
- ``sessions``: one row per session (records, messages, time span, tokens, tool calls, errors,
  compactions).
- ``tokens``: tokens per session per day.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import UnavailableError, UsageError

if TYPE_CHECKING:  # duckdb loads only when a report runs
    from datetime import date

    from projections.analytics import Analytics, QueryResult

REPORTS = {
    "tools": """SELECT tool, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
        round(100.0 * count(*) FILTER (WHERE is_error) / count(*), 1) AS error_pct,
        round(median(latency_s), 3) AS median_latency_s,
        count(*) FILTER (WHERE NOT answered) AS unanswered
        FROM tool_calls GROUP BY tool ORDER BY calls DESC, tool""",
    "sessions": """SELECT session, records, messages, first_ts, last_ts, tokens, tool_calls,
        errors, compactions FROM sessions ORDER BY first_ts, session""",
    "tokens": """SELECT session, CAST(date_trunc('day', ts) AS DATE) AS day,
        sum(tokens) AS tokens, count(*) AS records
        FROM events GROUP BY ALL ORDER BY day, session""",
}


# The formats a chart is written in, named by the file's extension: matplotlib's own backends
# write these without an outside program (``.pgf`` needs LaTeX, ``.jsonl`` is no picture).
PLOT_FORMATS = ("png", "svg", "pdf")


def plot_format(path: Path) -> str:
    """The format ``path``'s extension names (one of ``PLOT_FORMATS``), or a ``UsageError``:
    checked before a report runs, so a wrong name costs nothing and writes nothing."""
    fmt = path.suffix.removeprefix(".").lower()
    if fmt not in PLOT_FORMATS:
        raise UsageError(
            f"--plot {str(path)!r}: a chart is written as "
            + ", ".join(f".{f}" for f in PLOT_FORMATS)
            + " (the file's extension names the format)"
        )
    return fmt


def run_report(analytics: Analytics, name: str) -> QueryResult:
    """Run the named report over ``analytics``."""
    return analytics.query(REPORTS[name])


def plot_report(name: str, result: QueryResult, path: Path) -> None:
    """Write a chart of the report (PNG, SVG or PDF as ``path``'s extension says): error rate
    per tool, tokens per session, or cumulative tokens per session over time."""
    fmt = plot_format(path)
    try:
        import matplotlib
    except ImportError as exc:
        raise UnavailableError(
            "--plot needs matplotlib: pip install 'airsspec-memory[plot]'"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    if name == "tools":
        _plot_tools(plt, rows, path, fmt)
        return
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    if name == "sessions":
        ax.barh([r["session"] for r in rows], [r["tokens"] or 0 for r in rows], color="#2e86c1")
        ax.set_xlabel("tokens")
        ax.set_title("Tokens per session")
        ax.invert_yaxis()
    else:
        by_session: dict[str, list[tuple[date, int]]] = {}  # DuckDB gives a DATE as a date
        for r in rows:
            by_session.setdefault(r["session"], []).append((r["day"], r["tokens"] or 0))
        series = sorted(by_session.items())
        colours = series_colours(plt, len(series))
        for (session, points), colour in zip(series, colours, strict=True):
            days = np.array([day for day, _ in points], dtype="datetime64[D]")
            totals = np.cumsum([tokens for _, tokens in points])
            ax.plot(days, totals, marker="o", label=session, color=colour)
        ax.set_ylabel("cumulative tokens")
        ax.set_title("Tokens per session over time")
        ax.legend(fontsize="small")
        fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, format=fmt)
    plt.close(fig)


def series_colours(plt: Any, count: int) -> list[Any]:
    """``count`` colours no two alike: matplotlib's ten-colour cycle repeats after ten series
    (``report tokens`` draws one per session), so beyond it they are spread over a continuous
    colour map."""
    if count <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(count)]
    cmap = plt.get_cmap("turbo")
    return [cmap(i / (count - 1)) for i in range(count)]


def _plot_tools(plt: Any, rows: list[dict[str, Any]], path: Path, fmt: str) -> None:
    """Three panels per tool: calls (errors in red), error rate, and median latency."""
    tools = [r["tool"] for r in rows]
    fig, (calls, rate, latency) = plt.subplots(
        1, 3, figsize=(13, max(3, 0.45 * len(tools) + 1.5)), dpi=110, sharey=True
    )
    ok = [r["calls"] - (r["errors"] or 0) for r in rows]
    calls.barh(tools, ok, color="#2e86c1", label="succeeded")
    calls.barh(tools, [r["errors"] or 0 for r in rows], left=ok, color="#c0392b", label="failed")
    calls.set_title("Calls")
    calls.legend(loc="lower right")
    rate.barh(tools, [r["error_pct"] or 0 for r in rows], color="#c0392b")
    rate.set_title("Error rate (%)")
    latency.barh(tools, [r["median_latency_s"] or 0 for r in rows], color="#7d3c98")
    latency.set_title("Median latency (s)")
    calls.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, format=fmt)
    plt.close(fig)

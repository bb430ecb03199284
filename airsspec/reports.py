"""Named reports over the analytics views, as tables and, where a picture says more, PNG charts.

- ``tools``: calls, errors, error rate, latency and unanswered calls per tool.
- ``sessions``: one row per session (records, messages, time span, tokens, tool calls, errors,
  compactions).
- ``tokens``: tokens per session per day.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # duckdb loads only when a report runs
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


def run_report(analytics: Analytics, name: str) -> QueryResult:
    return analytics.query(REPORTS[name])


def plot_report(name: str, result: QueryResult, path: Path) -> None:
    """Write a PNG chart of the report: error rate per tool, tokens per session, or cumulative
    tokens per session over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    if name == "tools":
        tools = [r["tool"] for r in rows]
        ax.barh(tools, [r["error_pct"] or 0 for r in rows], color="#c0392b")
        for i, r in enumerate(rows):
            ax.text((r["error_pct"] or 0) + 0.5, i, f"{r['errors']}/{r['calls']}", va="center")
        ax.set_xlim(0, max([r["error_pct"] or 0 for r in rows] + [1]) * 1.2 + 1)
        ax.set_xlabel("error rate (%)")
        ax.set_title("Tool error rates (errors / calls)")
        ax.invert_yaxis()
    elif name == "sessions":
        ax.barh([r["session"] for r in rows], [r["tokens"] or 0 for r in rows], color="#2e86c1")
        ax.set_xlabel("tokens")
        ax.set_title("Tokens per session")
        ax.invert_yaxis()
    else:
        by_session: dict[str, list[tuple[object, int]]] = {}
        for r in rows:
            by_session.setdefault(r["session"], []).append((r["day"], r["tokens"] or 0))
        for session, points in sorted(by_session.items()):
            total, xs, ys = 0, [], []
            for day, tokens in points:
                total += tokens
                xs.append(day)
                ys.append(total)
            ax.plot(xs, ys, marker="o", label=session)
        ax.set_ylabel("cumulative tokens")
        ax.set_title("Tokens per session over time")
        ax.legend(fontsize="small")
        fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

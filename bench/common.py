"""Helpers shared by the benchmarks: repeated timing with medians, table printing, and the
workspace set-up the tests use too (kept in ``tests.support.logs``, so no test imports a
benchmark)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from tests.support.logs import edit_config, use_extractive_summarizer, write_synthetic_log

__all__ = [
    "edit_config",
    "median_rate",
    "median_seconds",
    "print_table",
    "use_extractive_summarizer",
    "write_synthetic_log",
]


def median_rate(run: Callable[[], int], repeats: int) -> float:
    """Median of ``items / seconds`` over ``repeats`` runs; ``run`` returns the item count."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        items = run()
        rates.append(items / (time.perf_counter() - start))
    return statistics.median(rates)


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``run`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}\n")
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)

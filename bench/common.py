"""Helpers shared by the benchmarks (and tests that build workspaces the same way): repeated
timing with medians, table printing, workspace set-up."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path


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


def use_extractive_summarizer(config: Path, *edits: tuple[str, str]) -> None:
    """Set an ``airsspec init`` config's summarizer to the extractive one (local, no network),
    and apply the other ``(old line, new line)`` edits. Only that key changes: other sections
    have an "auto" value of their own."""
    text = config.read_text()
    for old, new in (('summarizer = "auto"', 'summarizer = "extractive"'), *edits):
        if old not in text:
            raise ValueError(f"{config} has no line {old!r}")
        text = text.replace(old, new)
    config.write_text(text)


def write_synthetic_log(log_dir, sessions: int, per_session: int, content: str) -> int:
    """Write ``sessions`` logs of ``per_session`` single-append records, byte-identical to what
    ``EventLog.append`` writes (same encoder, same chain), much faster than appending one by one.
    Types cycle through user/thought/action/observation/assistant so projections see a mix."""
    from pathlib import Path

    from eventlog.canonical import encode_record
    from eventlog.ids import new_event_id

    folder = Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    kinds = [
        {"type": "user", "content": content},
        {"type": "thought", "content": content},
        {"type": "action", "tool": "bash", "params": {"cmd": "pytest -q"}},
        {"type": "observation", "result": content, "is_error": False},
        {"type": "assistant", "content": content},
    ]
    for s in range(sessions):
        name = f"s{s:04d}"
        prev = None
        lines = []
        for seq in range(1, per_session + 1):
            body = {
                "v": 1,
                "id": new_event_id(),
                "session": name,
                "seq": seq,
                "ts": f"2026-01-01T00:00:00.{seq % 1_000_000:06d}Z",
                "prev": prev,
                "meta": {"i": seq},
                **kinds[seq % len(kinds)],
            }
            line, prev = encode_record(body)
            lines.append(line)
        (folder / f"{name}.jsonl").write_bytes(b"".join(lines))
    return sessions * per_session

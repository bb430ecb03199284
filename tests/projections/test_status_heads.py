"""A status reads each session's log end once for all its tiers (``log_heads``): every tier's
status is what reading the ends for that tier alone gives, as the log grows, as tiers fold,
and with a log that cannot be read among the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec import Memory
from projections.status import log_heads, tier_status


def _say(text: str) -> dict[str, str]:
    return {"type": "user", "content": text}


def test_every_tiers_status_is_the_same_with_the_ends_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with Memory.open(tmp_path, create=True) as memory:
        log = memory.kernel.log
        projectors = memory.workspace.projectors()

        def each_alone() -> list[object]:
            return [tier_status(log, p) for p in projectors]

        steps = [
            lambda: [memory.append(f"s{n}", _say(f"the {n}th note")) for n in range(3)],
            lambda: memory.project(),
            lambda: memory.append("s1", _say("one more for s1")),
            lambda: memory.project("warm"),
            lambda: (memory.log_dir / "stray.jsonl").write_bytes(b"not a record\n"),
        ]
        lags = []
        for step in steps:
            step()
            heads = log_heads(log)
            shared = [tier_status(log, p, None, heads) for p in projectors]
            assert shared == each_alone()
            assert memory.status() == shared  # the facade's, an admin's: every tier as read
            lags.append({t.tier: t.lag_records for t in shared})
        assert [lag["cold"] for lag in lags] == [3, 0, 1, 1, 1]  # the daemon's tier: behind
        assert [lag["warm"] for lag in lags] == [3, 0, 1, 0, 0]
        assert heads["stray"] is None
        assert all("stray: not projected: its log cannot be read" in t.degraded for t in shared)

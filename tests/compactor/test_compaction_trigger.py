"""The compaction trigger with messages counted only when read (``projections.hot``: a message
within the cap by its bytes is saved uncounted): it fires at the same record, and writes the
same compaction events and hot windows, as when the fold counts every message at save."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import projections.hot
from airsspec.workspace import Workspace, init_workspace
from compactor.compactor import compaction_reason
from projections.hot import counted

CONFIG = """
[memory]
hot_window_size = 6
hot_token_budget = 200
compression_threshold = 0.8
message_cap_tokens = 64
chunk_size = 3
[compactor]
summarizer = "extractive"
"""

# what differs between two logs of the same events: ids, times and the hashes they make
UNIQUE = {"id", "ts", "hash", "prev", "first_hash", "last_hash"}

# short and long, ASCII and not (more bytes than tokens: the bound is loosest there)
texts = st.one_of(
    st.text(st.characters(codec="ascii", exclude_categories=("Cs", "Cc")), max_size=40),
    st.text(st.sampled_from("décisions 決定 ✓ 🚀 rate-limit src/api.py"), max_size=60),
    st.builds(
        lambda w, n: " ".join([w] * n),
        st.sampled_from(["retry", "重试", "ok."]),
        st.integers(20, 120),
    ),
)


def run(
    root: Path, messages: list[str]
) -> tuple[list[Any], list[dict[str, Any]], list[str | None]]:
    """Append ``messages`` one by one to session ``s``, compacting when due; the records, the
    hot window after each append (counted), and why it was due after each."""
    init_workspace(root)
    (root / "airsspec.toml").write_text(CONFIG)
    windows, reasons = [], []
    with Workspace.open(config=root / "airsspec.toml") as ws:
        compactor = ws.compactor()
        counter = ws.token_counter()
        for text in messages:
            ws.log.append("s", {"type": "user", "content": text})
            reason = compactor.due("s")
            window = ws.load_hot("s")
            assert window is not None
            # the lazy answer is the one from every message counted
            assert reason == compaction_reason(
                counted(window, counter), compactor.settings, counter
            )
            reasons.append(reason)
            if reason is not None:
                compactor.compact("s")
                compactor.due("s")  # the window after the summary
            windows.append(counted(ws.load_hot("s"), counter))  # type: ignore[arg-type]
        records = [loc.record.model_dump(exclude=UNIQUE) for loc in ws.log.read("s")]
    return records, [_plain(w) for w in windows], reasons


def _plain(window: Any) -> dict[str, Any]:
    from dataclasses import asdict

    data = asdict(window)
    for entry in data["entries"] + data["overflow"]:
        del entry["id"], entry["ts"], entry["hash"]
    if data["summary"]:
        del data["summary"]["event_hash"]
    del data["checkpoint"]
    return data


def same_as_counting_everything(
    factory: pytest.TempPathFactory, messages: list[str]
) -> list[str | None]:
    """Run ``messages`` with the fold as it is and with every message counted at save (as
    before: no text is ever within the cap by its bytes); assert the same records, windows
    and reasons; the reasons."""
    lazy = run(factory.mktemp("lazy"), messages)
    with mock.patch.object(projections.hot, "most_tokens", lambda text: 10**9):
        eager = run(factory.mktemp("eager"), messages)
    assert lazy == eager
    return lazy[2]


MIXED = ["retry " * 100, "決定 " * 30, "short", "x" * 10, "ok. " * 80, "🚀" * 20, "more"]


def test_a_mixed_session_compacts_at_the_same_records(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    reasons = same_as_counting_everything(tmp_path_factory, MIXED)
    assert [r is not None for r in reasons] == [False] * 4 + [True] * 3


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=st.lists(texts, min_size=1, max_size=25))
@pytest.mark.slow
def test_the_trigger_fires_at_the_same_record_as_counting_everything(
    tmp_path_factory: pytest.TempPathFactory, messages: list[str]
) -> None:
    same_as_counting_everything(tmp_path_factory, messages)


def test_a_short_window_is_judged_without_the_encoding(tmp_path: Path) -> None:
    """Messages whose bytes stay below the threshold are neither counted at save nor when the
    trigger is asked."""
    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text(CONFIG)
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        ws.log.append_many("s", [{"type": "user", "content": f"short note {i}"} for i in range(5)])
        compactor = ws.compactor()
        counter = ws.token_counter()
        with mock.patch.object(counter, "count", side_effect=AssertionError("counted")):
            assert compactor.due("s") is None
        window = ws.load_hot("s")
        assert window is not None and window.tokens is None
        assert all(e.tokens is None for e in window.uncovered)
        assert counted(window, counter).tokens == sum(
            counter.count(e.text) for e in window.uncovered
        )

"""Recall on an agent's coding history (the example workspace), with questions whose answers are
known: session diversity, on by default for chats, leaves these rankings as they are, since the
hits of such a query are mostly tool calls, their output and the agent's thoughts; applied to
every query, it lifts short unrelated messages of other sessions over the answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airsspec.workspace import Workspace
from projections.recall import Recall
from tests.support.example import QUESTIONS, example_workspace


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    with example_workspace(tmp_path_factory.mktemp("coding"), "minilm") as ws:
        yield ws


def _top(recall: Recall, k: int = 3) -> list[list[Any]]:
    return [recall.query_memory(q.text, k=k).hits for q in QUESTIONS]


def _answered(tops: list[list[Any]]) -> int:
    """Answer passages among the hits, summed over the questions."""
    return sum(
        q.answers(h.session, h.seq_from, h.seq_to)
        for q, hits in zip(QUESTIONS, tops, strict=True)
        for h in hits
    )


@pytest.mark.slow
def test_diversity_leaves_coding_history_alone(example: Workspace) -> None:
    defaults = example.recall()
    assert defaults.weights.session_diversity > 0  # on by default
    w = defaults.weights

    def variant(**update: float) -> Recall:
        return Recall(defaults.store, defaults.embedder, w.model_copy(update=update), defaults.log)

    plain = _top(defaults)
    off = _top(variant(session_diversity=0))
    everywhere = _top(variant(diversity_dialogue=0))
    ids = [[h.unit_id for h in hits] for hits in plain]
    assert ids == [[h.unit_id for h in hits] for hits in off]
    assert all("diversity" not in h.parts for hits in plain for h in hits)
    # the demo's question: the bug's own session answers it, first and second
    login = [h.session for h in plain[0][:2]]
    assert login == ["bugfix-login-timeout"] * 2
    assert _answered(plain) > _answered(everywhere)

"""What the rules extractor carries to later sessions is right: at least 0.8 of it is labelled a
learning worth carrying, on hand-labelled raw detector hits of real Claude Code transcripts
(the labels are in the repository; the transcripts are not, and the tests skip without them)."""

from __future__ import annotations

import json

import pytest

from compactor.detectors import keep, keep_previous
from tests.support.learning_labels import (
    DATA,
    LABELS,
    MIN_PRECISION,
    candidates,
    group,
    load_labels,
    score,
)

pytestmark = pytest.mark.skipif(
    not DATA.exists(), reason=f"the real Claude Code transcripts are not here ({DATA})"
)


@pytest.fixture(scope="module")
def hits():
    return candidates(DATA)


def test_every_raw_hit_is_labelled_and_every_label_names_a_hit(hits) -> None:
    labels = load_labels(LABELS)
    assert len(hits) >= 200
    assert {h.key for h in hits} == set(labels)  # a detector change must be relabelled


def test_the_cut_carries_learnings_with_precision_at_least_0_8(hits) -> None:
    labels = load_labels(LABELS)
    ours, before = score(hits, labels, keep), score(hits, labels, keep_previous)
    assert ours.carried >= 3 and ours.recall > 0  # not vacuous: it carries something
    assert ours.precision >= MIN_PRECISION > before.precision
    assert ours.recall >= before.recall


def test_precision_holds_on_each_transcript_left_out(hits) -> None:
    labels = load_labels(LABELS)
    for held in {group(h.file) for h in hits}:
        inside = [h for h in hits if group(h.file) == held]
        assert score(inside, labels, keep).precision >= MIN_PRECISION, held


def test_the_labels_hold_no_transcript_text() -> None:
    fields = {"file", "line", "uuid", "detector", "role", "sha256", "label", "reason"}
    for raw in LABELS.read_text().splitlines():
        item = json.loads(raw)
        assert set(item) == fields and item["label"] in ("yes", "no")
        assert len(item["sha256"]) == 64 and len(item["reason"]) < 120

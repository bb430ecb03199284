"""query_memory weighs each similarity relative to the best candidate's, yet keeps its relevance
floor on the similarities themselves; and a message whose speaker is the person a question
names scores its ``speaker`` part."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory

CHAT = [  # the same words said by two people: only the speaker tells them apart
    "Caroline: I painted a sunset over the lake last weekend.",
    "Melanie: I painted a sunset over the lake last weekend.",
    "Melanie: ok",
]


@pytest.fixture
def chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("AIRSSPEC_COLD_WEIGHT_SPEAKER", "0.3")
    with Memory.open(tmp_path, create=True) as memory:
        for line in CHAT:
            memory.append("chat", {"type": "user", "content": line})
        yield memory


def test_a_message_by_the_person_asked_about_ranks_before_the_same_words_by_another(
    chat: Memory,
) -> None:
    for name, other in (("Caroline", "Melanie"), ("Melanie", "Caroline")):
        hits = chat.search(f"What did {name} paint last weekend?", k=3)["hits"]
        assert hits[0]["text"].startswith(f"{name}:"), [h["text"] for h in hits]
        assert hits[0]["parts"]["speaker"] == 1.0
        by_other = next(h for h in hits if h["text"].startswith(f"{other}: I painted"))
        assert by_other["parts"]["speaker"] == 0.0
        assert by_other["score"] < hits[0]["score"]


def test_the_possessive_of_a_name_still_names_the_speaker(chat: Memory) -> None:
    hits = chat.search("What was Caroline's painting of?", k=3)["hits"]
    assert hits[0]["text"] == CHAT[0] and hits[0]["parts"]["speaker"] == 1.0


def test_the_speaker_part_is_zero_without_a_speaker_label(chat: Memory) -> None:
    chat.append("notes", {"type": "user", "content": "Caroline painted the fence blue."})
    hits = chat.search("What did Caroline paint blue?", k=5)["hits"]
    fence = next(h for h in hits if h["text"] == "Caroline painted the fence blue.")
    assert fence["parts"]["speaker"] == 0.0


def test_the_floor_reads_the_similarities_not_their_share_of_the_best(chat: Memory) -> None:
    # relative to the best candidate, the best unrelated passage would score its full weights
    floor = chat.workspace.settings.cold.min_score
    assert floor > 0
    assert chat.search("zebra migration patterns across the savanna", k=5)["hits"] == []
    hits = chat.search("painted sunset lake", k=5)["hits"]
    assert hits
    weights = chat.workspace.settings.cold
    assert all(weights.score(h["parts"]) >= floor for h in hits)
    assert all(h["score"] >= weights.score(h["parts"]) - 1e-5 for h in hits)  # parts: 6 places

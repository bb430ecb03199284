"""query_memory: a message whose speaker is the person a question names scores its ``speaker``
part, so what a person said of themself ranks before the same words said by someone else."""

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

"""query_memory reads a question as two sub-queries: its exact tokens (names, numbers,
identifiers), matched as text, and its focus (the question without them), matched by meaning.
The focus finds what is asked about rather than every passage that names the same person, and
the exact sub-query keeps a passage that says the question's own words first."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory
from projections.recall import query_anchors, query_focus

CHAT = [  # one passage says what Melanie does; the others only name the two of them
    "Melanie: Hey Caroline, so good to hear from you, Caroline! How are you, Caroline?",
    "Caroline: Thanks, Melanie! Melanie, you are the best. Miss you, Melanie!",
    "Melanie: Caroline, I'm so proud of you, Caroline. Let's catch up soon, okay?",
    "Melanie: Last weekend I signed up for a pottery class; shaping clay calms my mind.",
    "Caroline: Melanie, you always know how to make me smile, Melanie. Talk soon!",
    "Caroline: Oh Melanie, it was lovely seeing you, Melanie. Take care, Melanie!",
]


@pytest.fixture
def chat(tmp_path: Path):
    with Memory.open(tmp_path, create=True) as memory:  # the default embedder: MiniLM
        for line in CHAT:
            memory.append("chat", {"type": "user", "content": line})
        yield memory


def test_the_focus_is_the_question_without_its_exact_tokens() -> None:
    question = "What did Caroline's team ship in eventlog/log.py for v1.4?"
    assert set(query_anchors(question)) == {"caroline's", "eventlog/log.py", "v1.4"}
    assert query_focus(question) == "What did team ship in for"
    assert query_focus("how long are audit entries kept") == "how long are audit entries kept"
    assert query_focus("Caroline?") == "Caroline?"  # nothing else to ask: the query itself


def test_the_focus_finds_what_is_asked_not_who_is_named(chat: Memory) -> None:
    # the whole question's embedding lands nearest to a passage that repeats "Melanie"
    hits = chat.search("What hobby did Melanie pick up to relax?", k=3)["hits"]
    assert hits[0]["text"] == CHAT[3], [h["text"] for h in hits]
    assert set(hits[0]["parts"]) >= {"semantic", "focus", "lexical", "anchor"}


def test_a_passage_with_the_exact_words_of_the_question_stays_first(chat: Memory) -> None:
    for line in CHAT:
        question = line.split(": ", 1)[1]
        hits = chat.search(question, k=3)["hits"]
        assert hits[0]["text"] == line, (question, [h["text"] for h in hits])


def test_the_focus_s_nearest_passage_is_a_candidate_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one candidate a search: the whole question's nearest passage and its full-text match
    # greet Melanie; only the focus's own search proposes what she does for fun
    monkeypatch.setenv("AIRSSPEC_COLD_CANDIDATES", "1")
    monkeypatch.setenv("AIRSSPEC_COLD_WEIGHT_LEXICAL", "0")
    with Memory.open(tmp_path, create=True) as memory:
        for line in CHAT:
            memory.append("chat", {"type": "user", "content": line})
        hits = memory.search("What does Melanie do for fun?", k=1)["hits"]
    assert [h["text"] for h in hits] == [CHAT[3]]

"""RealMem's assistant chats as the retrieval benchmark reads them (``tests.support.realmem``):
no query turn and no answer quoting the evidence is ever ingested, and a query's ``until``
leaves only earlier sessions, its evidence among them; then a search with that ``until``
through ``Memory`` answers from earlier sessions only."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory
from tests.support.realmem import DATA, load

FILES = sorted(DATA.glob("*_dialogues_256k.json"))
pytestmark = pytest.mark.skipif(not FILES, reason=f"{DATA} (third-party data) is absent")


@pytest.fixture(scope="module")
def persona():
    return load(FILES[0])


def test_no_query_and_no_evidence_answer_is_ingested(persona) -> None:
    import json

    raw = json.loads(FILES[0].read_text())["dialogues"]
    left_out = {
        turn["content"]
        for session in raw
        for i, turn in enumerate(session["dialogue_turns"])
        if turn.get("is_query") or (i and session["dialogue_turns"][i - 1].get("is_query"))
    }
    ingested = {e["content"] for *_, events in persona.sessions for e in events}
    assert left_out and not left_out & ingested
    assert {q.text for q in persona.queries} <= left_out
    starts = [start for _, start, _ in persona.sessions]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)  # list order is time


def test_until_leaves_the_evidence_in_earlier_sessions(persona) -> None:
    """Nearly every evidence session starts before the query's ``until`` (the data names a few
    sessions that are not in it, and a couple of queries their own session: misses for every
    method alike)."""
    start_of = {
        events[0]["meta"]["realmem_session"]: start
        for _, start, events in persona.sessions
        if events
    }
    evidence = [(uuid, q.until) for q in persona.queries for uuid in q.evidence]
    earlier = [uuid for uuid, until in evidence if uuid in start_of and start_of[uuid] < until]
    assert len(earlier) >= 0.9 * len(evidence)


def test_a_search_with_until_answers_from_earlier_sessions(
    persona, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    query = next(q for q in persona.queries if q.until > persona.sessions[30][1])
    with Memory.open(tmp_path, create=True) as memory:
        for name, _, events in persona.sessions[:40]:
            memory.append_many(name, events, project=False)
        memory.project(["cold"])
        hits = memory.search(query.text, k=10, until=query.until, fresh=False)["hits"]
    assert len(hits) == 10
    assert all(hit["ts"] <= query.until for hit in hits)

"""query_memory ranks passages, not chunks: a long message's chunks are one hit, so the k hits
are k different passages; and nothing under the relevance floor is returned or recalled."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airsspec.memory import Memory

TOPICS = ["rollback", "canary", "autoscaler", "ingress", "secrets", "quota"]


def long_message(topic: str, number: int) -> str:
    """About 3,700 characters on ``topic``: four chunks or more, every one about it."""
    sentence = (
        f"Deployment note {number}: the kubernetes {topic} step of the release failed, "
        f"so we reviewed the {topic} settings of the cluster again and wrote them down. "
    )
    return sentence * 25


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as opened:
        for number, topic in enumerate(TOPICS):
            opened.append("ops", {"type": "assistant", "content": long_message(topic, number)})
        opened.append("ops", {"type": "user", "content": "ok"})
        opened.append("ops", {"type": "action", "tool": "bash", "params": {"cmd": "pytest"}})
        yield opened


def test_no_two_hits_are_chunks_of_one_message(memory: Memory) -> None:
    records = {r.seq: r for r in memory.replay("ops")}
    assert sum(len(r.content) > 3000 for r in records.values() if r.type == "assistant") == 6
    hits = memory.search("kubernetes release step failed cluster settings", k=10)["hits"]
    messages = [(h["session"], h["record_seq"]) for h in hits if h["kind"] == "message"]
    assert len(messages) == len(set(messages)) and len(set(messages)) >= len(TOPICS)
    for hit in hits:  # the hit's provenance is the whole record's
        record = records[hit["record_seq"]]
        assert (hit["seq_from"], hit["seq_to"]) == (record.seq, record.seq)
        assert list(hit["event_ids"]) == [record.id] and list(hit["hashes"]) == [record.hash]
        assert hit["text"] in record.content


def test_the_log_scan_also_gives_one_hit_per_message(memory: Memory) -> None:
    memory.project(("cold",))
    shutil.rmtree(memory.workspace.layout.vectors_dir)
    answer = memory.search("kubernetes release step failed", k=10, fresh=False)
    assert answer["mode"] == "log-scan"
    messages = [h["record_seq"] for h in answer["hits"]]
    assert len(messages) == len(set(messages)) == len(TOPICS)


def test_no_hit_under_the_relevance_floor(memory: Memory) -> None:
    floor = memory.workspace.settings.cold.min_score
    assert floor > 0
    for query in ("kubernetes canary", "what did the user reply", "zebra migration patterns"):
        for hit in memory.search(query, k=20)["hits"]:
            assert hit["score"] >= floor and hit["score"] > 0, (query, hit["score"])
    texts = [h["text"] for h in memory.search("kubernetes canary rollout", k=20)["hits"]]
    assert "ok" not in texts and not any(t.startswith("bash(") for t in texts)


def test_context_recalls_nothing_under_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        for _ in range(3):  # (a reply right after a passage shares its full-text words)
            memory.append("old", {"type": "user", "content": "ok"})
            memory.append("old", {"type": "action", "tool": "bash", "params": {"cmd": "pytest"}})
        memory.append("old", {"type": "user", "content": "The canary plan: 5% of pods first."})
        memory.append("now", {"type": "user", "content": "Go on."})
        text = memory.context("now", 300, query="what is the canary plan")
    recalled = [line for line in text.splitlines() if line.startswith("[recalled from")]
    assert any("canary plan" in line for line in recalled)
    assert not any(line.endswith("] ok") or "bash(" in line for line in recalled), recalled


def test_a_floor_of_zero_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("AIRSSPEC_COLD_MIN_SCORE", "0")
    with Memory.open(tmp_path, create=True) as memory:
        assert memory.workspace.settings.cold.min_score == 0
        memory.append("s", {"type": "user", "content": "ok"})
        memory.append("s", {"type": "user", "content": "the canary release plan"})
        hits = memory.search("canary release", k=10)["hits"]
        assert hits[0]["text"] == "the canary release plan"
        assert all(h["score"] > 0 for h in hits)  # a zero score is never a hit


def test_recency_breaks_ties_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two passages of the same words score the same: the newer one comes first, whatever the
    order of their sessions' names; a better passage stays ahead of both however old it is."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    text = "the canary release of the billing service was rolled back"
    with Memory.open(tmp_path, create=True) as memory:
        memory.append("z-new", {"type": "user", "content": text, "ts": "2026-03-01T00:00:00Z"})
        memory.append("b-old", {"type": "user", "content": text, "ts": "2026-01-01T00:00:00Z"})
        exact = "canary release billing service rolled back"
        memory.append("c-oldest", {"type": "user", "content": exact, "ts": "2025-01-01T00:00:00Z"})
        hits = memory.search("canary release billing service rolled back", k=3)["hits"]
    assert [h["session"] for h in hits] == ["c-oldest", "z-new", "b-old"]
    assert hits[1]["score"] == hits[2]["score"]


@pytest.mark.parametrize("said", ["user", "thought"])
def test_session_diversity_spreads_the_top_k_over_sessions_of_a_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: str
) -> None:
    """With ``session_diversity`` (0.3 by default), each hit's score is lowered by it for every
    hit already picked from its session: one session's ten near-copies no longer fill the top
    k; a score is capped by the one before it (part ``diversity``), so scores stay in order,
    none rises and none falls under the relevance floor. Only in a chat: the same near-copies
    as an agent's thoughts (its work, not a conversation) keep their places."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        assert memory.workspace.settings.cold.session_diversity == 0.3
        for i in range(10):
            note = f"kubernetes ingress timeout raised to {i}0 seconds in the staging cluster"
            memory.append("busy", {"type": said, "content": note})
        for name in ("quiet-1", "quiet-2"):
            memory.append(name, {"type": "user", "content": "the ingress timeout in staging"})
        query = "kubernetes ingress timeout staging cluster"
        spread = memory.search(query, k=5)["hits"]
        in_busy = memory.search(query, k=5, session="busy")["hits"]
        monkeypatch.setenv("AIRSSPEC_COLD_SESSION_DIVERSITY", "0")
    with Memory.open(tmp_path) as memory:
        plain = memory.search(query, k=5)["hits"]
        plain_busy = memory.search(query, k=5, session="busy")["hits"]
    assert {h["session"] for h in plain} == {"busy"}  # the case at hand
    if said == "thought":
        assert spread == plain
        return
    assert {h["session"] for h in spread} == {"busy", "quiet-1", "quiet-2"}
    scores = [h["score"] for h in spread]
    assert scores == sorted(scores, reverse=True)
    floor = memory.workspace.settings.cold.min_score
    assert all(h["parts"]["diversity"] <= 0 and h["score"] >= floor for h in spread)
    assert min(h["parts"]["diversity"] for h in spread) < 0
    # one session's hits keep their order and their scores
    assert [(h["unit_id"], h["score"]) for h in in_busy] == [
        (h["unit_id"], h["score"]) for h in plain_busy
    ]


def test_a_named_speakers_turns_are_not_spread() -> None:
    """A question naming a speaker is asked about that person's turns, often several in one
    session: they keep their places at any diversity; the same turns without the speaker part
    are spread over sessions like any others."""
    from projections.recall import _diversified

    def ranked(speaker: float) -> list[tuple[str, float, dict[str, float]]]:
        turns = [("s1:1:0", 0.6), ("s1:2:0", 0.58), ("s1:3:0", 0.56), ("s2:1:0", 0.4)]
        return [(u, score, {"speaker": speaker if u < "s2" else 0.0}) for u, score in turns]

    named = _diversified(ranked(1.0), 1.0, 4, reach=0.5)
    assert [u for u, _, _ in named] == ["s1:1:0", "s1:2:0", "s1:3:0", "s2:1:0"]
    assert [score for _, score, _ in named] == [0.6, 0.58, 0.56, 0.4]
    unnamed = _diversified(ranked(0.0), 1.0, 4, reach=0.5)
    assert [u for u, _, _ in unnamed] == ["s1:1:0", "s2:1:0", "s1:2:0", "s1:3:0"]
    assert [score for _, score, _ in unnamed] == [0.6, 0.4, 0.4, 0.4]  # capped, in order

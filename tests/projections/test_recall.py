"""query_memory: provenance back to verified log records, degradation when parts fail, and the
tool driven by the real Anthropic SDK through an HTTP mock transport."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import anthropic
import httpx2
import pytest

from airsspec.workspace import Workspace
from eventlog.render import record_text
from eventlog.schema import CompactionRecord
from eventlog.verify import verify
from projections.embedders import MiniLMEmbedder
from projections.memory_tool import QUERY_MEMORY_TOOL, tool_result
from projections.recall import Recall
from tests.support.example import example_workspace as _workspace


@pytest.fixture(scope="module")
def example_ws(tmp_path_factory: pytest.TempPathFactory):
    with _workspace(tmp_path_factory.mktemp("recall"), "minilm") as ws:
        yield ws


QUERIES = [
    "why were users logged out after five minutes",
    "HMAC signing of webhook payloads",
    "how long are audit entries kept",
    "time zone of the CSV export",
    "what did the agent summarise about the rate limiter",
]


def test_every_hit_maps_back_to_records_that_verify_accepts(example_ws: Workspace) -> None:
    ws = example_ws
    records = {loc.record.id: loc.record for s in ws.log.sessions() for loc in ws.log.read(s)}
    memory = ws.recall()
    kinds_seen = set()
    for query in QUERIES:
        for kinds in (None, ["summary"]):
            result = memory.query_memory(query, k=10, kinds=kinds)
            assert result.hits and not result.warnings and result.mode == "hybrid"
            for hit in result.hits:
                kinds_seen.add(hit.kind)
                if hit.kind == "source":
                    data = (ws.sources_dir / hit.source).read_bytes()
                    assert hashlib.sha256(data).hexdigest() == hit.hashes[0]
                    event = records[hit.event_ids[0]]  # the event that registered the file
                    assert (event.type, event.path, event.sha256) == (
                        "source_indexed",
                        hit.source,
                        hit.hashes[0],
                    )
                    lines = data.decode().splitlines()[hit.line_from - 1 : hit.line_to]
                    assert hit.text in "\n".join(lines)
                    continue
                (event_id,) = hit.event_ids
                record = records[event_id]
                assert (record.session, record.hash) == (hit.session, hit.hashes[0])
                if hit.kind == "message":
                    assert record.seq == hit.seq_from == hit.seq_to
                    assert hit.text in record_text(record)
                    continue
                assert isinstance(record, CompactionRecord) and hit.tier == "warm"
                assert record.from_seq <= hit.seq_from <= hit.seq_to <= record.to_seq
                assert hit.text in (record.summary, *(c.summary for c in record.chunks))
                covered = hit.covers["records"]
                assert [c["seq"] for c in covered] == list(range(hit.seq_from, hit.seq_to + 1))
                for entry in covered:
                    assert records[entry["id"]].hash == entry["hash"]
                    assert records[entry["id"]].seq == entry["seq"]
    assert kinds_seen == {"message", "summary", "source"}
    assert verify(ws.log).ok


def test_missing_table_answers_by_scanning_the_log(tmp_path: Path) -> None:
    with _workspace(tmp_path, "hash") as ws:
        shutil.rmtree(ws.layout.vectors_dir)
        result = ws.recall().query_memory("HMAC-SHA256 signing", k=3)
    assert result.mode == "log-scan" and "missing" in result.warnings[0]
    assert "HMAC-SHA256" in result.hits[0].text and result.hits[0].event_ids


def test_corrupt_table_answers_by_scanning_the_log(tmp_path: Path) -> None:
    with _workspace(tmp_path, "hash") as ws:
        for data in (ws.layout.vectors_dir / "units.lance" / "data").glob("*"):
            data.write_bytes(b"not lance")
        result = ws.recall().query_memory("HMAC-SHA256 signing", k=3)
    assert result.mode == "log-scan" and result.warnings
    assert "HMAC-SHA256" in result.hits[0].text


def test_removed_full_text_index_falls_back_to_semantic(tmp_path: Path) -> None:
    with _workspace(tmp_path, "hash") as ws:
        table = ws.recall().store.open()
        (fts,) = [i for i in table.list_indices() if i.columns == ["search_text"]]
        shutil.rmtree(ws.layout.vectors_dir / "units.lance" / "_indices" / fts.index_uuid)
        result = (
            Workspace.open(config=tmp_path / "airsspec.toml")
            .recall()
            .query_memory("HMAC-SHA256 signing", k=3)
        )
    assert result.mode == "semantic" and "full-text search failed" in result.warnings[0]
    assert "HMAC-SHA256" in result.hits[0].text


def test_failing_embedder_falls_back_to_full_text(example_ws: Workspace, tmp_path: Path) -> None:
    tampered = tmp_path / "model.onnx"
    tampered.write_bytes(b"\0" * 1024)  # a model file that is not the pinned one
    store = example_ws.recall().store
    result = Recall(store, MiniLMEmbedder(model_path=tampered)).query_memory("HMAC signing")
    assert result.mode == "full-text"
    assert "SHA-256" in result.warnings[0] and "full-text results only" in result.warnings[0]
    assert "HMAC" in result.hits[0].text


# ------------------------------------------------------------------ the tool, through the SDK


def _message(content: list[dict], stop_reason: str) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 10},
    }


def test_query_memory_tool_round_trip_through_the_sdk(example_ws: Workspace) -> None:
    asked = {"query": "why were users logged out", "k": 2, "session": "bugfix-login-timeout"}
    replies = [
        _message(
            [{"type": "tool_use", "id": "toolu_1", "name": "query_memory", "input": asked}],
            "tool_use",
        ),
        _message([{"type": "text", "text": "The token TTL was 300 s."}], "end_turn"),
    ]
    requests: list[dict] = []

    def server(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        return httpx2.Response(200, json=replies[len(requests) - 1])

    client = anthropic.Anthropic(
        api_key="test-key", http_client=httpx2.Client(transport=httpx2.MockTransport(server))
    )
    messages = [{"role": "user", "content": "Why did the login bug happen?"}]
    first = client.messages.create(
        model="claude-haiku-4-5", max_tokens=200, tools=[QUERY_MEMORY_TOOL], messages=messages
    )
    (tool_use,) = [b for b in first.content if b.type == "tool_use"]
    result = tool_result(example_ws.recall(), tool_use)
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [result]},
    ]
    client.messages.create(
        model="claude-haiku-4-5", max_tokens=200, tools=[QUERY_MEMORY_TOOL], messages=messages
    )
    assert requests[0]["tools"][0]["name"] == "query_memory"
    sent = requests[1]["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result" and sent["tool_use_id"] == "toolu_1"
    assert sent["is_error"] is False
    answer = json.loads(sent["content"])
    assert len(answer["hits"]) == 2
    assert {h["from"].split(" #")[0] for h in answer["hits"]} == {"bugfix-login-timeout"}


def test_tool_with_bad_input_returns_an_error_result(example_ws: Workspace) -> None:
    block = {"type": "tool_use", "id": "t", "name": "query_memory", "input": {"k": 0}}
    result = tool_result(example_ws.recall(), block)
    assert result["is_error"] is True
    assert "query: Field required" in result["content"] and "k:" in result["content"]
    late = {
        "type": "tool_use",
        "id": "t",
        "name": "query_memory",
        "input": {"query": "x", "since": "soon"},
    }
    assert "RFC 3339" in tool_result(example_ws.recall(), late)["content"]


def test_query_memory_scores_with_the_cold_section_as_configured(tmp_path: Path) -> None:
    """``[cold]`` extends ``RecallWeights``: what a user sets is what query_memory uses."""
    from airsspec.config import load_settings

    env = {
        "AIRSSPEC_COLD_EMBEDDER": "hash",
        "AIRSSPEC_COLD_WEIGHT_RECENCY": "0.7",
        "AIRSSPEC_COLD_CANDIDATES": "7",
    }
    weights = Workspace(tmp_path, load_settings(None, env)).recall().weights
    assert (weights.weight_recency, weights.candidates) == (0.7, 7)
    parts = {"semantic": 0, "focus": 0, "lexical": 0, "recency": 1, "anchor": 0, "speaker": 0}
    assert weights.score(parts) == 0.7


def test_query_anchors_are_the_exact_tokens_of_a_question() -> None:
    from projections.recall import query_anchors

    assert query_anchors('When did Caroline fix "group commit" in eventlog/log.py for v1.4?') == [
        "group commit",
        "caroline",
        "eventlog/log.py",
        "v1.4",
    ]


def test_the_pronoun_i_is_no_anchor_wherever_it_stands() -> None:
    """ "I" is capitalised mid-sentence and found in nearly every text: as an anchor it would
    match almost any passage and leave the focus without its subject."""
    from projections.recall import query_anchors

    question = "What did I tell Bob, and when I\u2019m away what I've asked of I2C?"
    assert query_anchors(question) == ["bob", "i2c"]


def test_query_memory_tool_results_are_mostly_passage_text(example_ws: Workspace) -> None:
    """At k=5 a tool result is at least 60% passage text, a text found in several places
    given once with each place; ``detail`` gives the provenance (the default weights)."""
    recall = example_ws.recall()
    text = total = 0
    for number, query in enumerate(QUERIES):
        asked = {"type": "tool_use", "id": f"t{number}", "name": "query_memory"}
        sent = tool_result(recall, {**asked, "input": {"query": query, "k": 5}})
        compact = json.loads(sent["content"])
        places = sum(len(hit["from"].split("; ")) for hit in compact["hits"])
        assert places == 5 and len({h["text"] for h in compact["hits"]}) == len(compact["hits"])
        assert all(list(hit) == ["text", "from"] for hit in compact["hits"])
        assert all(hit["from"].endswith(")") for hit in compact["hits"])  # the score
        text += sum(len(hit["text"]) for hit in compact["hits"])
        total += len(sent["content"])  # as the model reads it
        full = {**asked, "input": {"query": query, "k": 5, "detail": True}}
        detailed = json.loads(tool_result(recall, full)["content"])
        assert list(dict.fromkeys(h["text"] for h in detailed["hits"])) == [
            h["text"] for h in compact["hits"]
        ]
        assert all(h["event_ids"] and h["hashes"] for h in detailed["hits"])
    assert text / total >= 0.60, (text, total)

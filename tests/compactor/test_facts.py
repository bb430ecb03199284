"""A session's facts at its consolidation: what the rules find (each kind, with the records it
came from), one ``facts_recorded`` event per range read, and the Anthropic backend through an
HTTP mock transport (the real SDK client, only the network replaced) with its fallback."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from compactor.anthropic_extractor import AnthropicExtractor
from compactor.anthropic_summarizer import AnthropicSummarizer
from compactor.extractor import RulesExtractor
from compactor.facts import AnthropicFacts, FactRecorder, RulesFacts, facts_backend
from eventlog.log import EventLog
from projections.engine import Runner
from projections.facts import timeline
from projections.learnings import LearningsProjector
from tests.compactor.test_consolidation import SESSION_1
from tests.compactor.test_extractor import EVENTS
from tests.compactor.test_summarizers import Script, _reply


@pytest.fixture
def log(tmp_path: Path) -> EventLog:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": who, "content": text} for who, text in SESSION_1])
    return log


def _records(log: EventLog, session: str = "s") -> list:
    return [loc.record for loc in log.read(session)]


def _recorder(log: EventLog, tmp_path: Path, backend=None) -> FactRecorder:
    learnings = LearningsProjector(tmp_path / "learn")
    return FactRecorder(log, learnings, tmp_path / "locks", backend or RulesFacts())


def test_rules_find_what_a_session_leaves_behind(log: EventLog) -> None:
    found = [
        (f.kind, f.key, [r.seq for r in f.evidence]) for f in RulesFacts().facts(_records(log))
    ]
    assert found == [
        ("requirement", "emails", [1]),  # the words before its "must"
        ("requirement", "json fields", [3]),  # what it is for
        ("decision", "accounts table", [5]),
        ("file", "db/config.py", [6]),  # the agent said it changed it
        ("error_fix", "KeyError: 'email'", [7, 8]),  # the error, then the agent's "fixed"
        ("task", "next still need to add rate limiting to signup endpoint", [9]),
        ("task", "todo send welcome email asynchronously", [11]),
    ]


def test_rules_read_tools_todos_and_what_the_user_is(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    todos = [
        {"content": "Write the CSV export", "status": "completed"},
        {"content": "Document the export", "status": "pending"},
    ]
    log.append_many(
        "s", [*EVENTS, {"type": "action", "tool": "TodoWrite", "params": {"todos": todos}}]
    )
    found = {(f.kind, f.key): f for f in RulesFacts().facts(_records(log))}
    assert found["user", "role"].text == "I'm a data engineer on the billing team."
    assert [r.seq for r in found["file", "export.py"].evidence] == [9]
    assert found["task", "write csv export"].ended and not found["task", "document export"].ended
    fix = found["error_fix", "ERROR: test_export"]  # the error it names
    assert [r.seq for r in fix.evidence] == [7, 8, 11, 12]  # failed, error, re-run, success
    assert ("decision", "decided to write rows in batches of 1000") in found


def test_a_run_records_a_range_once(log: EventLog, tmp_path: Path) -> None:
    recorder = _recorder(log, tmp_path)
    (event,) = recorder.run("s")
    assert (event.type, event.from_seq, event.to_seq) == ("facts_recorded", 1, len(SESSION_1))
    assert all(f.since == _records(log)[f.evidence[0].seq - 1].ts for f in event.facts)
    assert recorder.run("s") == []  # nothing new: nothing recorded twice
    log.append_many("s", [{"type": "user", "content": "Invoices must be numbered."}])
    (more,) = recorder.run("s")
    assert (more.from_seq, more.to_seq) == (len(SESSION_1) + 1, len(SESSION_1) + 2)
    assert [f.key for f in more.facts] == ["invoices"]


def _anthropic(script: Script) -> AnthropicFacts:
    api = AnthropicSummarizer(
        model="claude-haiku-4-5",
        max_tokens=300,
        max_retries=0,
        api_key="test-key",
        http_client=httpx2.Client(transport=httpx2.MockTransport(script)),
    )
    return AnthropicFacts(api)


def test_claude_facts_go_through_the_same_event_and_replay_never_calls_it(
    log: EventLog, tmp_path: Path
) -> None:
    answer = [
        {"kind": "requirement", "key": "emails", "text": "Emails are lowercased.", "seq": 1},
        {"kind": "task", "key": "rate limiting", "text": "Rate-limit /signup.", "seq": 9},
    ]
    script = Script(httpx2.Response(200, json=_reply(json.dumps(answer))))
    (event,) = _recorder(log, tmp_path, _anthropic(script)).run("s")
    assert "#9 [user]" in json.loads(script.requests[0].content)["messages"][0]["content"]
    assert event.extractor.backend == "anthropic"
    assert [(f.kind, f.key, f.evidence[0].seq) for f in event.facts] == [
        ("requirement", "emails", 1),
        ("task", "rate limiting", 9),
    ]
    rebuilt = LearningsProjector(tmp_path / "rebuilt")
    Runner(log, [rebuilt]).rebuild()  # a replay: the client is not called again
    assert len(script.requests) == 1
    assert [f.text for f in timeline(rebuilt.states(), visible=None, as_of=None)] == [
        "Emails are lowercased.",
        "Rate-limit /signup.",
    ]


@pytest.mark.parametrize(
    "response",
    [
        httpx2.Response(200, json=_reply("Here are the facts you asked for.")),
        httpx2.Response(200, json=_reply('[{"kind": "task", "key": "k", "text": "t", "seq": 99}]')),
        httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}}),
    ],
)
def test_a_failed_answer_falls_back_to_the_rules_and_says_why(
    log: EventLog, tmp_path: Path, response: httpx2.Response
) -> None:
    (event,) = _recorder(log, tmp_path, _anthropic(Script(response))).run("s")
    assert event.extractor.backend == "rules" and event.extractor.fallback_from == "anthropic"
    assert event.extractor.fallback_error
    assert [f.key for f in event.facts] == [f.key for f in RulesFacts().facts(_records(log))]


def test_the_backend_follows_the_learnings_extractors() -> None:
    assert isinstance(facts_backend(RulesExtractor()), RulesFacts)
    claude = AnthropicExtractor(model="claude-haiku-4-5", max_tokens=300, api_key="test-key")
    backend = facts_backend(claude)
    assert isinstance(backend, AnthropicFacts) and backend.api is claude.api  # one client


def test_rules_read_a_written_file_and_an_announced_decision(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many(
        "s",
        [
            {"type": "action", "tool": "write_file", "params": {"path": "specs/hooks.md"}},
            {"type": "observation", "result": "wrote 14 requirements"},
            {"type": "assistant", "content": "Decision: a delivery queue polled by a worker."},
        ],
    )
    found = [
        (f.kind, f.key, [r.seq for r in f.evidence]) for f in RulesFacts().facts(_records(log))
    ]
    assert found == [
        ("file", "specs/hooks.md", [1]),
        ("decision", "decision delivery queue polled by worker", [3]),
    ]

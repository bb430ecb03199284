"""The learnings extractor: what the rules find, and the Anthropic backend through an HTTP mock
transport (the real SDK client, only the network replaced), with its fallback recorded."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from compactor.anthropic_extractor import AnthropicExtractor
from compactor.detectors import candidates
from compactor.extractor import Extractor, RulesExtractor
from eventlog.log import EventLog
from projections.learnings import LearningsProjector
from tests.compactor.test_summarizers import Script, _reply

EVENTS = [
    {"type": "user", "content": "Build a CSV export for the reports page."},
    {"type": "assistant", "content": "I'll write it with pandas."},
    {"type": "user", "content": "No, don't add pandas. Use the csv module instead."},
    {"type": "user", "content": "I'm a data engineer on the billing team."},
    {"type": "user", "content": "Always stream large files; never load them whole."},
    {"type": "assistant", "content": "We decided to write rows in batches of 1000."},
    {"type": "action", "tool": "Bash", "params": {"command": "pytest -q"}},
    {
        "type": "observation",
        "result": "ERROR: test_export failed: KeyError 'total'",
        "is_error": True,
    },
    {"type": "action", "tool": "Edit", "params": {"file_path": "export.py"}},
    {"type": "observation", "result": "ok"},
    {"type": "action", "tool": "Bash", "params": {"command": "pytest -q"}},
    {"type": "observation", "result": "1 passed"},
    {"type": "user", "content": "Whenever a test fails, show me the traceback first."},
    {"type": "user", "content": "Thanks, looks good."},
]


@pytest.fixture
def log(tmp_path: Path) -> EventLog:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", EVENTS)
    return log


def _extractor(log: EventLog, tmp_path: Path, backend) -> Extractor:
    return Extractor(log, LearningsProjector(tmp_path / "learn"), tmp_path / "locks", backend, 5)


def test_rules_find_each_kind_with_its_evidence(log: EventLog) -> None:
    records = [loc.record for loc in log.read("s")]
    found = {(f.kind, f.text): f for f in RulesExtractor().extract(records, first_request=True)}
    kinds = sorted({kind for kind, _ in found})
    assert kinds == ["anchor", "correction", "decision", "error_fix", "pattern", "preference"]
    assert ("anchor", EVENTS[0]["content"]) in found  # the first request, verbatim
    assert ("correction", "No, don't add pandas. Use the csv module instead.") in found
    assert ("anchor", "I'm a data engineer on the billing team.") in found
    fix = next(f for (kind, _), f in found.items() if kind == "error_fix")
    assert [r.seq for r in fix.evidence] == [7, 8, 11, 12]  # failed, error, re-run, its success
    assert "KeyError" in fix.text and "after changing export.py" in fix.text
    assert not any("Thanks" in text for _, text in found)


def test_a_run_appends_learnings_and_its_range_atomically_once(
    log: EventLog, tmp_path: Path
) -> None:
    extractor = _extractor(log, tmp_path, RulesExtractor())
    assert extractor.due("s") is not None
    appended = extractor.run("s")
    assert appended[-1].type == "extracted" and appended[-1].to_seq == len(EVENTS)
    assert {r.batch[1] for r in appended} == {len(appended)}  # one atomic batch
    assert appended[-1].learnings == len(appended) - 1
    assert extractor.due("s") is None and extractor.run("s", force=True) == []


def _anthropic(script: Script) -> AnthropicExtractor:
    return AnthropicExtractor(
        model="claude-haiku-4-5",
        max_tokens=300,
        max_retries=0,
        api_key="test-key",
        http_client=httpx2.Client(transport=httpx2.MockTransport(script)),
    )


def test_anthropic_extractor_records_what_the_model_found(log: EventLog, tmp_path: Path) -> None:
    answer = [
        {
            "kind": "preference",
            "text": "Use the csv module, not pandas.",
            "seq": 3,
            "scope": "project",
        }
    ]
    script = Script(httpx2.Response(200, json=_reply(json.dumps(answer))))
    appended = _extractor(log, tmp_path, _anthropic(script)).run("s", force=True)
    body = json.loads(script.requests[0].content)
    assert body["model"] == "claude-haiku-4-5" and "#3 [user]" in body["messages"][0]["content"]
    learned = [r for r in appended if r.type == "learning"]
    assert [(r.kind, r.source) for r in learned] == [
        ("anchor", "anthropic"),
        ("preference", "anthropic"),
    ]
    assert learned[1].evidence[0].seq == 3 and learned[1].explicit
    assert appended[-1].extractor.backend == "anthropic"


@pytest.mark.parametrize(
    "response",
    [
        httpx2.Response(200, json=_reply("Sure! Here are some thoughts.")),
        httpx2.Response(200, json=_reply('[{"kind": "preference", "text": "x", "seq": 99}]')),
        httpx2.Response(
            529, json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
        ),
    ],
)
def test_anthropic_failures_fall_back_to_the_rules_and_say_why(
    log: EventLog, tmp_path: Path, response: httpx2.Response
) -> None:
    appended = _extractor(log, tmp_path, _anthropic(Script(response))).run("s", force=True)
    info = appended[-1].extractor
    assert (info.backend, info.fallback_from) == ("rules", "anthropic") and info.fallback_error
    assert {r.source for r in appended if r.type == "learning"} == {"extractive"}
    assert appended[-1].learnings >= 5


def _records(tmp_path: Path, events: list[dict]) -> list:
    log = EventLog(tmp_path / "cut", durability="off")
    log.append_many("c", events)
    return [loc.record for loc in log.read("c")]


def test_an_error_is_a_learning_only_when_the_same_action_then_succeeds(tmp_path: Path) -> None:
    failing = [
        {"type": "action", "tool": "Bash", "params": {"command": "mix test"}},
        {"type": "observation", "result": "error: undefined function get/2", "is_error": True},
        {"type": "action", "tool": "Read", "params": {"file_path": "test/x_test.exs"}},
        {"type": "observation", "result": "defmodule XTest do"},
    ]
    records = _records(tmp_path, failing)
    raw = [c for c in candidates(records, first_request=False) if c.detector == "error_fix"]
    assert len(raw) == 1 and not raw[0].rerun  # a raw hit: an error, then the next good step
    assert RulesExtractor().extract(records, first_request=False) == []  # no re-run: no learning


def test_only_text_a_person_typed_is_kept_as_the_users_statement(tmp_path: Path) -> None:
    rule = "Always quote shell variables in hooks."
    events = [
        {"type": "user", "content": f"<system-reminder>{rule}</system-reminder>"},
        {"type": "user", "content": rule, "meta": {"kind": "compact_summary"}},
        {"type": "user", "content": rule, "meta": {"isSidechain": True}},
        {"type": "assistant", "content": rule},
        {"type": "thought", "content": rule},
        {"type": "action", "tool": "Read", "params": {"file_path": "HOOKS.md"}},
        {"type": "observation", "result": rule},
    ]
    records = _records(tmp_path, events)
    raw = candidates(records, first_request=False)
    assert {c.role for c in raw if c.detector == "preference"} == {
        "user",
        "assistant",
        "thought",
        "observation",
    }  # every detector hit is listed before the cut ...
    kept = RulesExtractor().extract(records, first_request=False)  # ... the cut keeps only the
    # compaction summary's line, as the agent's (inferred) account, never as the user's
    assert [(f.kind, f.explicit, f.evidence[0].seq) for f in kept] == [("preference", False, 2)]
    typed = _records(tmp_path / "typed", [{"type": "user", "content": rule}])
    found = RulesExtractor().extract(typed, first_request=False)
    assert [(f.kind, f.explicit) for f in found] == [("preference", True)]


def test_a_phrase_ending_in_punctuation_is_detected_before_a_space(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": "Decision: store times in UTC."}])
    records = [loc.record for loc in log.read("s")]
    kinds = {c.kind for c in candidates(records, first_request=False)}
    assert "decision" in kinds

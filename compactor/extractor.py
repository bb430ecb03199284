"""The learnings extractor: reads a session's new records and appends what it learned.

Like the compactor it is a policy with one contract, ``due(session)`` and ``run(session)``, that
the daemon, the CLI and the facade drive the same way. A run reads the messages after the last
``extracted`` event of the session, finds learnings, and appends them with one ``extracted``
event naming the range read, in one atomic batch: a crash leaves all of it or none, and a rerun
starts where the last one ended, so nothing is extracted twice or skipped. The learnings
projection then folds what was recorded; no projection ever runs an extractor.

Backends: ``RulesExtractor`` (local, deterministic) finds explicit corrections,
"always/never/prefer" statements, decisions, habits ("whenever ...") and error -> fix pairs,
and keeps identity anchors verbatim: the session's first request, and what the user says about
themself or the project's ground rules. ``AnthropicExtractor`` asks the Messages API and falls
back to the rules on any failure, recording why, as the compactor's summarizer does.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from compactor.compactor import file_lock
from compactor.errors import SummarizerError
from eventlog.log import EventLog
from eventlog.render import record_text
from eventlog.schema import (
    MEMORY_SESSION,
    ActionRecord,
    ExtractorInfo,
    ObservationRecord,
    Record,
)
from projections.engine import Runner
from projections.learnings import MESSAGE_TYPES, LearningsProjector

RULES_VERSION = "rules-1"
MAX_TEXT = 500
ERROR_WINDOW = 12  # records after an error in which its fix is looked for

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_SELF = re.compile(
    r"\b(i am an? |i'm an? |my name is|call me |i work (at|for|on) |my role is|"
    r"ground rules?|house rules?)",
    re.I,
)
_PROJECT_RULE = re.compile(
    r"\b(in this (project|repo|repository|codebase)|this (project|repo|codebase) (uses|is|has)|"
    r"our (project|codebase|team|stack|convention))\b.*\b(always|never|must|only|convention|"
    r"rule|uses?)\b",
    re.I,
)
_CORRECTION = re.compile(
    r"^(no|nope|wrong|actually|not quite|that's (wrong|not)|that is (wrong|not)|stop|instead)"
    r"\b|\b(i (said|told you|asked for)|you (should|shouldn't|should not) have|please don't|"
    r"don't do that|that's not what|not what i (asked|meant|wanted))\b",
    re.I,
)
_PREFERENCE = re.compile(
    r"\b(always|never|prefer|from now on|going forward|in (the )?future|make sure (to|you)|"
    r"please use|we use|don't use|do not use|avoid)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(we decided|i decided|let's go with|let's use|decision:|we'll use|we will use|"
    r"we're going with|going with|we chose|agreed to|settled on)\b",
    re.I,
)
_PATTERN = re.compile(r"\b(whenever|every time|each time|usually|typically|as a rule)\b", re.I)
_ERROR_TEXT = re.compile(r"^(error|fatal|traceback)|\b(error|exception|failed)\b[:!]", re.I)


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def learning_id(session: str, seq: int, kind: str, text: str) -> str:
    """A stable id: the same learning found again (a re-extraction) has the same id."""
    digest = hashlib.sha256(f"{session}\0{seq}\0{kind}\0{text}".encode()).hexdigest()
    return f"L{digest[:12]}"


@dataclass(frozen=True, slots=True)
class Found:
    """A learning an extractor found, with the records it came from."""

    kind: str
    text: str
    scope: str
    explicit: bool
    evidence: tuple[Record, ...]

    def event(self, source: str) -> dict[str, Any]:
        """The ``learning`` event recording it."""
        first = self.evidence[0]
        return {
            "type": "learning",
            "learning_id": learning_id(first.session, first.seq, self.kind, self.text),
            "kind": self.kind,
            "text": self.text,
            "scope": self.scope,
            "source": source,
            "explicit": self.explicit,
            "evidence": [
                {"session": r.session, "seq": r.seq, "hash": r.hash} for r in self.evidence
            ],
        }


class Backend(Protocol):
    """Finds learnings in a run of records."""

    info: ExtractorInfo

    def extract(self, records: Sequence[Record], first_request: bool) -> list[Found]:
        """The learnings in ``records`` (messages, in order). ``first_request``: the first user
        message among them is the session's first (an identity anchor)."""
        ...


def _said(record: Record) -> str:
    return getattr(record, "content", "") or ""


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class RulesExtractor:
    """Local, deterministic extraction by rules (see the module)."""

    info = ExtractorInfo(backend="rules", model="rules", version=RULES_VERSION)

    def extract(self, records: Sequence[Record], first_request: bool) -> list[Found]:
        """The learnings in ``records`` (see ``Backend``)."""
        found: list[Found] = []
        pending_error: tuple[ObservationRecord, str] | None = None
        error_age = 0
        last_action: ActionRecord | None = None
        for record in records:
            if record.type == "user":
                text = _said(record)
                if first_request and text.strip():
                    found.append(Found("anchor", text, "session", True, (record,)))
                    first_request = False
                found += self._statements(record, text, explicit=True)
            elif record.type == "assistant":
                found += [
                    f
                    for f in self._statements(record, _said(record), explicit=False)
                    if f.kind == "decision"
                ]
            elif isinstance(record, ActionRecord):
                last_action = record
            elif isinstance(record, ObservationRecord):
                line = _first_line(record_text(record))
                if record.is_error or _ERROR_TEXT.search(line[:200]):
                    pending_error, error_age = (record, _clip(line, 200)), 0
                elif pending_error is not None and last_action is not None:
                    error, message = pending_error
                    fix = _clip(
                        f"{last_action.tool} "
                        + " ".join(str(v) for v in last_action.params.values()),
                        200,
                    )
                    text = f"{message} -> fixed by: {fix}"
                    found.append(Found("error_fix", text, "project", False, (error, last_action)))
                    pending_error = None
            if pending_error is not None:
                error_age += 1
                if error_age > ERROR_WINDOW:
                    pending_error = None
        return found

    @staticmethod
    def _statements(record: Record, text: str, *, explicit: bool) -> list[Found]:
        found = []
        sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
        for i, sentence in enumerate(sentences):
            if len(sentence) < 8:
                continue
            kind = None
            if explicit and (_SELF.search(sentence) or _PROJECT_RULE.search(sentence)):
                found.append(Found("anchor", _clip(sentence, 2000), "project", True, (record,)))
                continue
            if explicit and _CORRECTION.search(sentence):
                kind = "correction"  # with what to do instead, when the user said it next
                if i + 1 < len(sentences) and len(sentence) + len(sentences[i + 1]) < MAX_TEXT:
                    sentence = f"{sentence} {sentences[i + 1]}"
            elif explicit and _PREFERENCE.search(sentence):
                kind = "preference"
            elif _DECISION.search(sentence):
                kind = "decision"
            elif explicit and _PATTERN.search(sentence):
                kind = "pattern"
            if kind is not None:
                found.append(Found(kind, _clip(sentence), "project", explicit, (record,)))
        return found


@dataclass
class Extractor:
    """The policy: extract a session's learnings once enough new messages arrived, or at its
    end (see the module)."""

    log: EventLog
    learnings: LearningsProjector
    lock_dir: Path
    backend: Backend
    every: int = 20  # new messages that make a session due
    name: str = field(default="extract", init=False)

    def _state(self, session: str) -> Any:
        Runner(self.log, [self.learnings]).catch_up(sessions=[session])
        loaded = self.learnings.load(session)
        return loaded[0] if loaded else None

    def _reason(self, state: Any) -> str | None:
        new = state.info.get("last_seq", 0) - state.extracted_through if state else 0
        if new <= 0:
            return None
        if new >= self.every:
            return f"{new} new record(s) since #{state.extracted_through}"
        if state.info.get("ended"):
            return f"the session ended with {new} record(s) not read yet"
        return None

    def due(self, session: str) -> str | None:
        """Why ``session`` has learnings to extract now (None when it has not)."""
        return None if session == MEMORY_SESSION else self._reason(self._state(session))

    def run(self, session: str, *, force: bool = False) -> list[Record]:
        """Extract ``session`` if it is due (or ``force``); return what was appended."""
        if session == MEMORY_SESSION:
            return []
        lock = self.lock_dir / f"extract-{session}.lock"
        with file_lock(lock, wait=False, holder="extractor"):
            state = self._state(session)
            if not force and self._reason(state) is None:
                return []
            start = (state.extracted_through if state else 0) + 1
            records = [
                located.record
                for located in self.log.read(session, from_seq=start)
                if located.record.type in MESSAGE_TYPES
            ]
            if not records:
                return []
            first_request = state is None or state.info.get("first_user_seq", 0) >= start
            info, found = self.backend.info, []
            try:
                found = self.backend.extract(records, first_request)
            except SummarizerError as exc:
                fallback = RulesExtractor()
                found = fallback.extract(records, first_request)
                info = fallback.info.model_copy(
                    update={"fallback_from": info.backend, "fallback_error": str(exc)[:500]}
                )
            source = "anthropic" if info.backend == "anthropic" else "extractive"
            events = [f.event(source) for f in found]
            events.append(
                {
                    "type": "extracted",
                    "from_seq": start,
                    "to_seq": records[-1].seq,
                    "extractor": info.model_dump(),
                    "learnings": len(found),
                }
            )
            return list(self.log.append_many(session, events, system=True))


def default_backend(choice: str, **anthropic: Any) -> Backend:
    """The configured backend ("auto": anthropic when a key is set, else rules)."""
    if choice == "auto":
        choice = "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "rules"
    if choice == "anthropic":
        from compactor.anthropic_extractor import AnthropicExtractor

        return AnthropicExtractor(**anthropic)
    if choice == "rules":
        return RulesExtractor()
    raise ValueError(f"unknown extractor {choice!r}; use auto, rules or anthropic")

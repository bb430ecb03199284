"""The learnings extractor: reads a session's new records and appends what it learned.

Like the compactor it is a policy with one contract, ``due(session)`` and ``run(session)``, that
the daemon, the CLI and the facade drive the same way. A run reads the messages after the last
``extracted`` event of the session, finds learnings, and appends them with one ``extracted``
event naming the range read, in one atomic batch: a crash leaves all of it or none, and a rerun
starts where the last one ended, so nothing is extracted twice or skipped. The learnings
projection then folds what was recorded; no projection ever runs an extractor.

Backends: ``RulesExtractor`` (local, deterministic) keeps the detectors' hits that pass the cut
(``compactor.detectors``): corrections, "always/never/prefer" statements, habits ("whenever
...") and identity anchors (the session's first request, verbatim, and what the user says about
themself or the project's ground rules) only from text a person typed; the user's answers to the
agent's questions; the agent's announced decisions and diagnoses ("the issue is ..."); and an
error -> fix only when the failing action was run again and succeeded. ``AnthropicExtractor``
asks the Messages API and falls back to the rules on any failure, recording why, as the
compactor's summarizer does.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import TypeAdapter, ValidationError

from compactor.compactor import file_lock
from compactor.detectors import RULES_VERSION, candidates, clip, keep
from eventlog.errors import SummarizerError
from eventlog.log import Log
from eventlog.render import record_text
from eventlog.schema import CONVERSATION_TYPES, MEMORY_SESSION, ExtractorInfo, Record
from projections.engine import Runner
from projections.learnings import LearningsProjector


class _Numbered(Protocol):
    seq: int


_Item = TypeVar("_Item", bound=_Numbered)


def conversation_since(log: Log, session: str, start: int) -> list[Record]:
    """What a person and an agent said or did in ``session`` from ``start`` on (the records
    an extractor or a consolidation reads)."""
    return [
        located.record
        for located in log.read(session, from_seq=start)
        if located.record.type in CONVERSATION_TYPES
    ]


def ask_claude(
    api: Any, prompt: str, records: Sequence[Record], items: TypeAdapter[list[_Item]], what: str
) -> tuple[list[_Item], dict[int, Record]]:
    """Claude's answer to ``prompt`` over ``records`` (each ``#seq [type] text``, clipped), read
    as ``items``, and the records by seq; ``SummarizerError`` when the answer is not a list of
    ``what`` or names a message that was not given. ``api``: an ``AnthropicSummarizer``."""
    by_seq = {r.seq: r for r in records}
    text = "\n".join(f"#{r.seq} [{r.type}] {clip(record_text(r), 2000)}" for r in records)
    answer = api.call(prompt, text, api.max_tokens)
    match = re.search(r"\[.*\]", answer, re.S)
    try:
        found = items.validate_json(match.group(0) if match else answer)
    except ValidationError as exc:
        raise SummarizerError(f"the answer is not a list of {what}: {exc}") from exc
    unknown = [item.seq for item in found if item.seq not in by_seq]
    if unknown:
        raise SummarizerError(f"the answer names messages that were not given: {unknown}")
    return found, by_seq


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


class RulesExtractor:
    """Local, deterministic extraction by rules: the detectors' hits that pass the cut
    (``compactor.detectors``)."""

    info = ExtractorInfo(backend="rules", model="rules", version=RULES_VERSION)

    def extract(self, records: Sequence[Record], first_request: bool) -> list[Found]:
        """The learnings in ``records`` (see ``Backend``)."""
        return [
            Found(c.kind, c.text, c.scope, c.explicit, c.evidence)
            for c in candidates(records, first_request)
            if keep(c)
        ]


@dataclass
class Extractor:
    """The policy: extract a session's learnings once enough new messages arrived, or at its
    end (see the module)."""

    log: Log
    learnings: LearningsProjector
    lock_dir: Path
    backend: Backend
    every: int = 20  # new messages that make a session due
    name: str = field(default="extract", init=False)

    def _state(self, session: str) -> Any:
        Runner(self.log, [self.learnings]).catch_up(sessions=[session])
        loaded = self.learnings.state_store.load(session)
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
            records = conversation_since(self.log, session, start)
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

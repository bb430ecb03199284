"""The facts of a session, recorded at its consolidation: decisions, requirements, files and
artefacts, errors and their fixes, open tasks, and what the user says about themself.

``FactRecorder.run(session)`` reads the messages after the last ``facts_recorded`` event of the
session and appends one more naming the range read and the facts found, so a rerun neither
repeats nor skips a record, and a replay never calls a model (``projections.facts`` folds the
event). Each fact names the records it came from and the subject it is about (``key``): a later
fact of the same kind and key supersedes it when read.

Backends: ``RulesFacts`` (local, deterministic) builds on the learnings' detectors
(``compactor.detectors``: what a person typed, the agent's announced decisions, observed error ->
fix) and adds what a session leaves behind: the files its tools changed, the tasks of its latest
todo list (a completed one ends the open task of the same text), tasks and errors named in the
conversation. ``AnthropicFacts`` asks the Messages API (the learnings extractor's client, so one
key configures both) and falls back to the rules on any failure, recording why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from compactor.compactor import file_lock
from compactor.detectors import RULES_VERSION, any_word, candidates, clip, keep, typed_by_person
from compactor.extractor import ask_claude, conversation_since
from eventlog.errors import SummarizerError
from eventlog.log import Log
from eventlog.render import record_text
from eventlog.schema import MEMORY_SESSION, ActionRecord, ExtractorInfo, Record
from projections.engine import Runner
from projections.learnings import EDIT_TOOLS, LearningsProjector

PROMPT_VERSION = "facts-1"
PROMPT = (
    "You read an AI agent's working session and list the facts a later session must know: "
    "decisions taken (with the reason), requirements and rules the user stated, files and "
    "artefacts changed, errors met with the fix that worked, tasks left open or finished, and "
    "what the user says about themself. Answer with only a JSON array; each item is "
    '{"kind": "decision|requirement|file|error_fix|task|user", "key": "the subject in a few '
    'words (a file\'s path, a task\'s text)", "text": "one self-contained sentence", "ended": '
    'true only for a task finished, "seq": <the #number of the message it came from>}. '
    "An empty array when there is nothing."
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_TASK = any_word(
    "todo",
    "to do",
    "still need to",
    "still needs to",
    "next,? we",
    "left open",
    "open task",
    "remaining",
    "not done yet",
    "later we",
)
_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b(?::\s*\S+)?|\berror:\s*\S+", re.I)
_FIXED = any_word("fixed", "fix was", "resolved", "works now", "now passes", "the cause")
_CHANGED_PATH = re.compile(
    r"\b(changed|edited|updated|created|wrote|added|modified|renamed|moved)\b[^.]*?"
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z]{1,5})\b",
    re.I,
)
_ANNOUNCED = re.compile(r"^decision:|\b(we|i) (decided|chose) to\b|\bwe will go with\b", re.I)
_MODAL = any_word("must", "should", "has to", "have to", "needs? to", "always", "never")
_FOR = re.compile(r"\bfor (?:the |every |all |our |each )?([\w /.-]{3,60}?)(?:[.,;!]|$)", re.I)
_USER_KEYS = (
    (any_word("my name is", "call me"), "name"),
    (re.compile(r"\b(i am an? |i'm an? |my role is)", re.I), "role"),
    (re.compile(r"\bi work (at|for|on)\b", re.I), "work"),
)
_ARTICLES = {
    *("the", "a", "an", "all", "every", "our", "we", "i", "you", "each"),
    *("no", "yes", "ok", "please", "actually", "also", "and", "so", "then", "now"),
}  # words a subject never starts with or is made of
ERROR_WINDOW = 4  # messages after an error in which the agent's "fixed" is looked for
MAX_EVIDENCE = 8  # records a file fact names: its first and latest changes


@dataclass(slots=True)
class Found:
    """A fact a backend found, with the records it came from."""

    kind: str
    key: str
    text: str
    evidence: list[Record]
    ended: bool = False

    def fact(self) -> dict[str, Any]:
        """The fact as the ``facts_recorded`` event stores it."""
        evidence = self.evidence
        if len(evidence) > MAX_EVIDENCE:
            half = MAX_EVIDENCE // 2
            evidence = evidence[:half] + evidence[-half:]
        return {
            "kind": self.kind,
            "key": clip(self.key, 200),
            "text": clip(self.text, 2000),
            "ended": self.ended,
            "evidence": [{"session": r.session, "seq": r.seq, "hash": r.hash} for r in evidence],
            "since": self.evidence[0].ts,
        }


class FactsBackend(Protocol):
    """Finds a session's facts in a run of its records."""

    info: ExtractorInfo

    def facts(self, records: Sequence[Record]) -> list[Found]:
        """The facts in ``records`` (messages, in order)."""
        ...


def _words_key(text: str, limit: int = 6) -> str:
    found = (w.strip("./-") for w in re.findall(r"[\w./-]+", text.casefold()))
    words = [w for w in found if w and w not in _ARTICLES]
    return " ".join(words[:limit])


def subject(kind: str, text: str) -> str:
    """The subject a fact of ``kind`` is about, from its sentence: for a decision, what it is
    "for" (else its words); for a requirement, the words before its "must"/"should" (else what
    it is for, else its words); for the user, which of their attributes; for an error, the
    error it names."""
    if kind == "user":
        return next((key for pattern, key in _USER_KEYS if pattern.search(text)), _words_key(text))
    error = _ERROR.search(text) if kind == "error_fix" else None
    if error is not None:
        return error.group(0)
    modal = _MODAL.search(text) if kind == "requirement" else None
    if modal is not None:
        before = _words_key(text[: modal.start()], 4)
        if before:
            return before
    purpose = _FOR.search(text)
    if purpose is not None and kind in ("decision", "requirement"):
        return _words_key(purpose.group(1), 4)
    return _words_key(text, 8)


class RulesFacts:
    """Local, deterministic facts by rules (see the module)."""

    info = ExtractorInfo(backend="rules", model="rules", version=f"facts-{RULES_VERSION}")

    def facts(self, records: Sequence[Record]) -> list[Found]:
        """The facts in ``records`` (see ``FactsBackend``)."""
        found: list[Found] = []
        tasks = self._tasks(records)
        found += tasks
        said = {f.text for f in tasks}
        for c in candidates(records, first_request=False):
            if c.text in said or not keep(c):
                continue
            kind = {
                "self": "user",
                "decision": "decision",
                "plan": "decision",
                "error_fix": "error_fix",
                "cause": "error_fix",
            }.get(c.detector, "requirement")
            if kind == "requirement" and not c.typed:
                continue
            found.append(Found(kind, subject(kind, c.text), c.text, list(c.evidence)))
            said.add(c.text)
        found += self._requirements(records, said)
        found += self._decisions(records, said)
        found += self._errors(records)
        found += self._files(records)
        return sorted(found, key=lambda f: f.evidence[0].seq)  # stable: the rules' order within

    @staticmethod
    def _sentences(record: Record) -> list[str]:
        return [s.strip() for s in _SENTENCE.split(record_text(record)) if len(s.strip()) > 8]

    def _tasks(self, records: Sequence[Record]) -> list[Found]:
        """The items of the latest todo list (completed ones end the task), and the tasks a
        person named ("TODO", "still need to")."""
        found: list[Found] = []
        todos: tuple[ActionRecord, list[Any]] | None = None
        for record in records:
            if isinstance(record, ActionRecord) and isinstance(record.params.get("todos"), list):
                todos = (record, record.params["todos"])
            elif record.type == "user" and typed_by_person(record):
                for sentence in self._sentences(record):
                    if _TASK.search(sentence):
                        text = clip(sentence, 300)
                        found.append(Found("task", _words_key(text, 10), text, [record]))
        if todos is not None:
            action, items = todos
            for item in items:
                if isinstance(item, dict) and str(item.get("content") or "").strip():
                    text = clip(str(item["content"]), 300)
                    done = item.get("status") == "completed"
                    found.append(Found("task", _words_key(text, 10), text, [action], ended=done))
        return found

    def _requirements(self, records: Sequence[Record], said: set[str]) -> list[Found]:
        """What a person typed with a "must"/"should" (the learnings' cut leaves a bare one
        out: as a fact of this session it is a requirement)."""
        found = []
        for record in records:
            if record.type != "user" or not typed_by_person(record):
                continue
            for sentence in self._sentences(record):
                text = clip(sentence, 300)
                if any(text in other for other in said):  # a part of a fact already found
                    continue
                if _MODAL.search(sentence) and not _TASK.search(sentence):
                    found.append(Found("requirement", subject("requirement", text), text, [record]))
                    said.add(text)
        return found

    def _decisions(self, records: Sequence[Record], said: set[str]) -> list[Found]:
        """What the agent announced as a decision ("Decision: ...", "we decided to ...") that
        the learnings' detectors did not keep."""
        found = []
        for record in records:
            if record.type != "assistant":
                continue
            for sentence in self._sentences(record):
                text = clip(sentence, 300)
                if _ANNOUNCED.search(sentence) and not any(text in other for other in said):
                    found.append(Found("decision", subject("decision", text), text, [record]))
                    said.add(text)
        return found

    def _errors(self, records: Sequence[Record]) -> list[Found]:
        """An error named in a message or a tool's result, and the agent's "fixed" that came
        within ``ERROR_WINDOW`` messages after it."""
        found = []
        for i, record in enumerate(records):
            if record.type not in ("user", "observation"):
                continue
            error = _ERROR.search(record_text(record))
            if error is None:
                continue
            for later in records[i + 1 : i + 1 + ERROR_WINDOW]:
                if later.type == "assistant" and _FIXED.search(record_text(later)):
                    fix = clip(record_text(later), 240)
                    text = f"{error.group(0)} → {fix}"
                    found.append(Found("error_fix", error.group(0), text, [record, later]))
                    break
        return found

    def _files(self, records: Sequence[Record]) -> list[Found]:
        """Each file the session's tools changed, or the agent said it changed."""
        changed: dict[str, list[Record]] = {}
        for record in records:
            path = None
            if isinstance(record, ActionRecord) and record.tool in EDIT_TOOLS:
                given = (record.params.get(k) for k in ("file_path", "path", "notebook_path"))
                path = next((v for v in given if isinstance(v, str) and v), None)
            elif record.type == "assistant":
                match = _CHANGED_PATH.search(record_text(record))
                path = match.group(2) if match else None
            if path is not None:
                changed.setdefault(path, []).append(record)
        return [
            Found("file", path, f"{path}: changed at #{', #'.join(str(r.seq) for r in uses)}", uses)
            for path, uses in changed.items()
        ]


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Literal["decision", "requirement", "file", "error_fix", "task", "user"]
    key: str = Field(min_length=1)
    text: str = Field(min_length=1)
    ended: bool = False
    seq: int


_ITEMS = TypeAdapter(list[_Item])


class AnthropicFacts:
    """Facts from the Anthropic Messages API (see the module)."""

    def __init__(self, api: Any) -> None:
        self.api = api  # a ``compactor.anthropic_summarizer.AnthropicSummarizer``
        self.info = ExtractorInfo(backend="anthropic", model=api.model, version=PROMPT_VERSION)

    def facts(self, records: Sequence[Record]) -> list[Found]:
        """The facts in ``records`` (see ``FactsBackend``); ``SummarizerError`` when the
        answer is not a list of facts naming messages that were given."""
        items, by_seq = ask_claude(self.api, PROMPT, records, _ITEMS, "facts")
        return [
            Found(item.kind, item.key, item.text, [by_seq[item.seq]], ended=item.ended)
            for item in items
        ]


def facts_backend(learnings_backend: Any) -> FactsBackend:
    """The facts backend that goes with the learnings extractor's: Claude through the same
    client when it is Anthropic's, else the rules."""
    api = getattr(learnings_backend, "api", None)
    return AnthropicFacts(api) if api is not None else RulesFacts()


@dataclass
class FactRecorder:
    """Records a session's facts once per range of records (see the module)."""

    log: Log
    learnings: LearningsProjector
    lock_dir: Path
    backend: FactsBackend = field(default_factory=RulesFacts)

    def run(self, session: str) -> list[Record]:
        """Record the facts of ``session``'s records not read yet; what was appended."""
        if session == MEMORY_SESSION:
            return []
        with file_lock(self.lock_dir / f"facts-{session}.lock", wait=True, holder="consolidation"):
            Runner(self.log, [self.learnings]).catch_up(sessions=[session])
            loaded = self.learnings.state_store.load(session)
            start = (loaded[0].facts_through if loaded else 0) + 1
            records = conversation_since(self.log, session, start)
            if not records:
                return []
            info = self.backend.info
            try:
                found = self.backend.facts(records)
            except SummarizerError as exc:
                fallback = RulesFacts()
                found = fallback.facts(records)
                info = fallback.info.model_copy(
                    update={"fallback_from": info.backend, "fallback_error": str(exc)[:500]}
                )
            event = {
                "type": "facts_recorded",
                "from_seq": start,
                "to_seq": records[-1].seq,
                "extractor": info.model_dump(exclude_none=True),
                "facts": [f.fact() for f in found],
            }
            return list(self.log.append_many(session, [event], system=True))

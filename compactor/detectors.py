"""The rules extractor's detectors, and the cut that keeps only what is worth carrying.

Two stages, so that precision can be measured and the cut argued for separately:

1. ``candidates(records, first_request)``: every raw detector hit, each with the detector that
   fired and who wrote the text (``role``): each sentence of every message (user, assistant,
   thought, tool input and output) is matched against the statement detectors (``self``,
   ``project_rule``, ``correction``, ``preference``, ``decision``, ``plan``, ``pattern``,
   ``cause``, ``requirement``; the first that fires wins); the session's first typed request is
   a ``first_request`` hit; the result of a question tool is an ``answer`` hit; and an error
   observation followed by a good one within ``ERROR_WINDOW`` records is an ``error_fix`` hit.
   This stage is deliberately generous.
2. ``keep(candidate)`` (the cut, ``RULES_VERSION``), by who said it rather than by tuned scores:

   - **The user's words.** Only a person typing in the conversation states a rule, a
     correction, a preference or a decision (``TYPED_DETECTORS``): the text must come from a
     ``user`` record a person wrote, not a tool result or input, a compaction summary, a
     command's captured output, a harness reminder or expanded skill, or the prompt one agent
     gave another (a sidechain / subagent's "user"). A person's answer to the agent's question
     counts as their words too. These are ``explicit``.
   - **The agent's words** (inferred, ``explicit`` false): a ``decision`` it announced in an
     ``assistant`` message, its diagnosis of a failure (``cause``), and the rule-like lines of
     a compaction summary (``SUMMARY_DETECTORS``), never a line that reports an edit (a change
     log). A generic "must"/"should" (``requirement``) is never enough.
   - **Error -> fix.** Kept only when it was observed: an action failed with an error (an
     exception, ``error:``, ``fatal:``; a failing test assertion is the ordinary loop), the
     same action (same command head or file) was run again, and that re-run succeeded; the
     learning names the error and what changed in between.
   - **Short and self-contained.** A statement longer than ``MAX_STATEMENT`` characters, or
     one that is code, is not a sentence a person would carry.

Pure functions of the records: the same records always give the same candidates and cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eventlog.render import record_text
from eventlog.schema import MESSAGE_TYPES, ActionRecord, ObservationRecord, Record
from projections.learnings import EDIT_TOOLS

RULES_VERSION = "rules-2"
MAX_TEXT = 500
MAX_STATEMENT = 300  # longer "statements" are pasted documents, not a rule someone stated
QUESTION_TOOLS = frozenset({"AskUserQuestion"})  # tools whose result is the person's answer
ERROR_WINDOW = 12  # records after an error in which the next good observation is looked for
RERUN_WINDOW = 80  # records after an error in which a re-run of the same action is looked for

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _words(*phrases: str) -> re.Pattern[str]:
    """A detector: any of ``phrases`` (regular expressions) as whole words, in any case. The
    edges are "no word character beside", not ``\\b``, so a phrase that ends in punctuation
    ("decision:") matches before a space too."""
    return re.compile(r"(?<!\w)(" + "|".join(phrases) + r")(?!\w)", re.I)


_SELF = re.compile(
    r"\b(i am an? |i'm an? |my name is|call me |i work (at|for|on) |my role is|"
    r"ground rules?|house rules?)",
    re.I,
)
_PROJECT_SUBJECT = _words(
    "in this (project|repo|repository|codebase)",
    "this (project|repo|codebase) (uses|is|has)",
    "our (project|codebase|team|stack|convention)",
)
_PROJECT_WORD = _words("always", "never", "must", "only", "convention", "rule", "uses?")


def _project_rule(sentence: str) -> Any:
    """The project named, then a rule word after it: two searches, so a long line repeating
    the phrase costs linear time (one pattern with ``.*`` between them is quadratic)."""
    subject = _PROJECT_SUBJECT.search(sentence)
    return subject and _PROJECT_WORD.search(sentence, subject.end())


_CORRECTION = re.compile(
    r"^(no|nope|wrong|actually|not quite|that's (wrong|not)|that is (wrong|not)|stop|instead)"
    r"\b|\b(i (said|told you|asked for)|you (should|shouldn't|should not) have|please don't|"
    r"don't do that|that's not what|not what i (asked|meant|wanted))\b",
    re.I,
)
_PREFERENCE = _words(
    "always", "never", "prefer", "from now on", "going forward", "in (the )?future",
    "make sure (to|you)", "please use", "we use", "don't use", "do not use", "avoid",
)  # fmt: skip
_DECISION = _words(
    "we decided", "i decided", "let's go with", "let's use", "decision:", "we'll use",
    "we will use", "we're going with", "going with", "we chose", "agreed to", "settled on",
)  # fmt: skip
_PLAN = _words("i'll use", "i will use", "let me use", "switch(ed)? to")
_PATTERN = _words("whenever", "every time", "each time", "usually", "typically", "as a rule")
_CAUSE = _words(
    "root cause", "turns out", "the (issue|problem|bug) (is|was)", "the fix (is|was)",
    "(fails|failed|broke|breaks) because", "caused by",
)  # fmt: skip
_REQUIREMENT = _words(
    "must", "should", "need to", "needs to", "has to", "important", "remember", "note that",
    "don't", "do not",
)  # fmt: skip
_ERROR_TEXT = re.compile(r"^(error|fatal|traceback)|\b(error|exception|failed)\b[:!]", re.I)

# Statement detectors in the order they are tried: (detector, kind of learning, pattern).
STATEMENTS: tuple[tuple[str, str, Callable[[str], Any]], ...] = (
    ("self", "anchor", _SELF.search),
    ("project_rule", "anchor", _project_rule),
    ("correction", "correction", _CORRECTION.search),
    ("preference", "preference", _PREFERENCE.search),
    ("decision", "decision", _DECISION.search),
    ("plan", "decision", _PLAN.search),
    ("pattern", "pattern", _PATTERN.search),
    ("cause", "error_fix", _CAUSE.search),
    ("requirement", "preference", _REQUIREMENT.search),
)


def any_word(*phrases: str) -> re.Pattern[str]:
    """A case-blind pattern finding any of ``phrases`` (each a regex) as whole words, the one
    found its group 1: a list of cue words read as a list."""
    return re.compile(rf"\b({'|'.join(phrases)})\b", re.I)


# What a person's typed words are kept for (a bare "must"/"should" is too common to be a rule).
TYPED_DETECTORS = frozenset(
    {"self", "project_rule", "correction", "preference", "decision", "plan", "pattern"}
)
# What a compaction summary is kept for.
SUMMARY_DETECTORS = frozenset({"preference", "decision", "plan", "cause"})
# Text a harness put in a user record: captured command output, reminders, interruptions.
_HARNESS = re.compile(
    r"<(command-[a-z]+|local-command-[a-z]+|system-reminder|bash-[a-z]+|user-prompt-[a-z-]+)>"
    r"|<task-notification>|^\[request interrupted|^caveat: the messages below"
    r"|^this session is being continued",
    re.I,
)
_RAISED = re.compile(r"\*\* \(\w+|^(error|fatal)\b|\b(error|fatal):", re.I)
_ERROR_LINE = any_word("failed", "failure", "not found", "cannot", "can't")
_CHANGE_LOG = re.compile(
    r"^\W*(modified|changed|added|updated|created|removed|renamed|deleted)\b"
    r"|\b[\w/.-]+\.(ex|exs|py|ts|tsx|js|jsx|rb|go|rs|java|kt|md|json|toml|ya?ml|sql|sh)\b",
    re.I,
)
_CODE = re.compile(r"[{};=]\s*$|^\s*(#|//|/\*|\*(?!\*)|def |class |import |from \S+ import)|`{3}")


# Terminal control: escape sequences (colours, titles, links) and the other control characters
# a pasted or captured output carries; a learning is read in a prompt or a terminal, not run.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?"
    r"|[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]"
)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` on one line without terminal control, at most ``limit`` characters (an
    ellipsis marks a cut)."""
    text = " ".join(_CONTROL.sub("", text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A raw detector hit: which detector fired, on whose text, and the learning it proposes."""

    detector: str
    role: str  # the record type the text came from: user, assistant, thought, action, ...
    kind: str
    text: str
    scope: str
    explicit: bool
    evidence: tuple[Record, ...]
    typed: bool = False  # a person typed it (a user record that is no harness or agent text)
    rerun: bool = False  # error_fix: the same tool on the same target succeeded afterwards
    summary: bool = False  # from a compaction summary: the agent's own account of the session


def typed_by_person(record: Record) -> bool:
    """Whether a ``user`` record is text a person typed: not a compaction summary, a harness
    insert (a reminder, a command's output, an expanded skill: Claude Code marks those
    ``isMeta`` in the source line), nor the prompt a parent agent gave a subagent."""
    meta: dict[str, Any] = dict(record.meta) if record.meta is not None else {}
    if record.type != "user" or meta.get("kind") == "compact_summary":
        return False
    if meta.get("isSidechain") or meta.get("agentId"):
        return False
    source = record.origin.text if record.origin is not None else ""
    if '"isMeta":true' in source.replace(" ", ""):
        return False
    return not _HARNESS.search(getattr(record, "content", "") or "")


def _meta(record: Record) -> dict[str, Any]:
    return dict(record.meta) if record.meta is not None else {}


def _failed(observation: Record) -> bool:
    line = next((s.strip() for s in record_text(observation).splitlines() if s.strip()), "")
    return bool(getattr(observation, "is_error", False) or _ERROR_TEXT.search(line[:200]))


def _target(action: ActionRecord) -> tuple[str, str]:
    """What an action acts on: the tool and its command head or file (a re-run matches it)."""
    params = action.params
    for key in ("file_path", "path", "notebook_path", "url", "pattern"):
        if isinstance(params.get(key), str):
            return action.tool, params[key]
    command = params.get("command")
    if isinstance(command, str):
        words = [w for w in command.split() if "=" not in w][:2]  # skip VAR=value prefixes
        return action.tool, " ".join(words)
    return action.tool, ""


def _statements(record: Record, text: str) -> list[Candidate]:
    hits = []
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    typed = typed_by_person(record)
    summary = _meta(record).get("kind") == "compact_summary"
    for i, sentence in enumerate(sentences):
        if len(sentence) < 8:
            continue
        for detector, kind, search in STATEMENTS:
            if not search(sentence):
                continue
            if detector == "correction" and i + 1 < len(sentences):
                joined = f"{sentence} {sentences[i + 1]}"  # with what to do instead
                sentence = joined if len(joined) < MAX_TEXT else sentence
            limit = 2000 if kind == "anchor" else MAX_TEXT
            text = clip(sentence, limit)
            hits.append(
                Candidate(
                    detector,
                    record.type,
                    kind,
                    text,
                    "project",
                    typed,
                    (record,),
                    typed,
                    summary=summary,
                )
            )
            break
    return hits


def _error_line(text: str) -> str:
    """The line of an error output that says what went wrong (an exception, ``error:``), else
    its first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (_RAISED, _ERROR_LINE):
        hit = next((line for line in lines if pattern.search(line)), None)
        if hit is not None:
            return hit
    return lines[0] if lines else ""


def _answered(records: Sequence[Record]) -> dict[int, ActionRecord | None]:
    """For each observation (by index), the action it answers: by tool-use id (None when that
    call is not among ``records``: never a guess, or a fetched page could pass for the answer
    to a question asked meanwhile), else the last."""
    action_of: dict[str, ActionRecord] = {}
    answered: dict[int, ActionRecord | None] = {}
    last: ActionRecord | None = None
    for index, record in enumerate(records):
        if isinstance(record, ActionRecord):
            last = record
            if (use := _meta(record).get("tool_use_id")) is not None:
                action_of[use] = record
        elif isinstance(record, ObservationRecord):
            use = _meta(record).get("tool_use_id")
            answered[index] = action_of.get(use) if use is not None else last
    return answered


def _answers(
    records: Sequence[Record], answered: dict[int, ActionRecord | None]
) -> list[Candidate]:
    """What the person answered when the agent asked (a question tool's result): their words."""
    hits = []
    for index, action in answered.items():
        record = records[index]
        if action is None or action.tool not in QUESTION_TOOLS or _failed(record):
            continue
        text = clip(record_text(record))
        hits.append(
            Candidate(
                "answer", "observation", "decision", text, "project", True, (record,), typed=True
            )
        )
    return hits


def _error_fixes(
    records: Sequence[Record], answered: dict[int, ActionRecord | None]
) -> list[Candidate]:
    """One hit per error observation followed by a good one within ``ERROR_WINDOW``: with the
    next run of the same action when it succeeded (``rerun``), else the next good step."""
    hits: list[Candidate] = []
    for index, record in enumerate(records):
        if not isinstance(record, ObservationRecord) or not _failed(record):
            continue
        failed = answered[index]
        later = [
            i for i in answered if index < i <= index + RERUN_WINDOW and answered[i] is not None
        ]
        good = next(
            (i for i in later if i <= index + ERROR_WINDOW and not _failed(records[i])), None
        )
        if good is None or failed is None:
            continue
        target = _target(failed)
        again = next((i for i in later if _target(answered[i]) == target), None)  # type: ignore[arg-type]
        message = clip(_error_line(record_text(record).removeprefix("ERROR: ")), 200)
        tool, what = target
        if again is not None and not _failed(records[again]):
            rerun = answered[again]
            assert rerun is not None
            changed = sorted(
                {
                    _target(r)[1]
                    for r in records[index:again]
                    if isinstance(r, ActionRecord) and r.tool in EDIT_TOOLS
                }
            )
            how = (
                f"after changing {', '.join(changed)}"
                if changed
                else "re-run as " + clip(str(rerun.params.get("command", rerun.params)), 150)
            )
            text = f"{tool} {what} failed ({message}); it passed {how}"
            evidence: tuple[Record, ...] = (failed, record, rerun, records[again])
            hits.append(
                Candidate(
                    "error_fix",
                    "observation",
                    "error_fix",
                    text,
                    "project",
                    False,
                    evidence,
                    rerun=True,
                )
            )
            continue
        step = answered[good]
        assert step is not None
        fix = clip(f"{step.tool} " + " ".join(str(v) for v in step.params.values()), 200)
        hits.append(
            Candidate(
                "error_fix",
                "observation",
                "error_fix",
                f"{message} -> fixed by: {fix}",
                "project",
                False,
                (failed, record, step),
            )
        )
    return hits


def candidates(records: Sequence[Record], first_request: bool) -> list[Candidate]:
    """Every raw detector hit in ``records`` (messages, in order), before any cut."""
    hits: list[Candidate] = []
    for record in records:
        if record.type == "user" and first_request and typed_by_person(record):
            text = getattr(record, "content", "") or ""
            if text.strip():
                hits.append(
                    Candidate(
                        "first_request", "user", "anchor", text, "session", True, (record,), True
                    )
                )
                first_request = False
        if record.type in MESSAGE_TYPES:
            hits += _statements(record, record_text(record))
    answered = _answered(records)
    hits += _answers(records, answered) + _error_fixes(records, answered)
    order = {id(r): i for i, r in enumerate(records)}
    return sorted(hits, key=lambda c: order[id(c.evidence[1 if c.detector == "error_fix" else 0])])


def keep(candidate: Candidate) -> bool:
    """The cut (see the module): whether a raw hit becomes a learning."""
    if candidate.detector == "first_request":
        return True
    if candidate.detector == "error_fix":
        # a failing assertion that later passes is the ordinary test loop; a learning is a
        # tool that errored (an exception, ``error:``, ``fatal:``) and ran once it was fixed
        return candidate.rerun and bool(_RAISED.search(candidate.text))
    if candidate.detector == "answer":
        return True
    if len(candidate.text) > MAX_STATEMENT and candidate.kind != "anchor":
        return False
    if _CODE.search(candidate.text):
        return False
    if candidate.summary:
        # the agent's account of the session when it was compacted: its rules, decisions and
        # diagnoses are inferred learnings; a line reporting an edit is a change log
        return candidate.detector in SUMMARY_DETECTORS and not _CHANGE_LOG.search(candidate.text)
    if candidate.role in ("assistant", "thought"):
        # the agent's words: a decision it announced, or its diagnosis of a failure (inferred)
        return candidate.detector == "cause" or (
            candidate.detector == "decision" and candidate.role == "assistant"
        )
    return candidate.typed and candidate.detector in TYPED_DETECTORS


def keep_previous(candidate: Candidate) -> bool:
    """The cut of the previous rules (``rules-1``), as a predicate on the same hits, to measure
    against: every statement hit in any ``user`` record, an agent's ``decision``, and every
    error followed by a good observation."""
    if candidate.detector in ("first_request", "error_fix"):
        return True
    if candidate.role == "user":
        return candidate.detector in (
            "self",
            "project_rule",
            "correction",
            "preference",
            "decision",
            "pattern",
        )
    return candidate.role == "assistant" and candidate.detector == "decision"

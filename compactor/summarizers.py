"""Summarizers: a small protocol, and the local, deterministic extractive summarizer.

A summarizer turns a chunk of messages into a summary (``summarize``) and several summaries into
one (``merge``). The extractive summarizer keeps what an agent must not forget, the "anchors":
user constraints and corrections, decisions, file paths, errors and their fixes, tool calls with
their outcome, open tasks; then fills the rest of its token budget with the most salient remaining
sentences. It is a pure function of its input: the same messages give the same bytes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from eventlog.schema import SummarizerInfo
from projections.tokens import TokenCounter

PROMPT_VERSION = "tree-reduce-v1"


@dataclass(frozen=True, slots=True)
class Message:
    """A message as a summarizer sees it."""

    seq: int
    type: str
    text: str
    meta: dict | None = None
    is_error: bool = False
    tool: str | None = None


class Summarizer(Protocol):
    """What the compactor needs of a summarizer: summarize chunks, merge summaries."""

    info: SummarizerInfo

    def summarize(self, messages: list[Message], budget_tokens: int) -> str:
        """A summary of ``messages`` within ``budget_tokens``."""
        ...

    def merge(self, summaries: list[str], budget_tokens: int) -> str:
        """One summary of several, within ``budget_tokens``."""
        ...


# ----------------------------------------------------------------------------- extractive

_PATH = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.\w+|\b[\w-]+\.(?:py|md|ts|js|json|toml|"
    r"yaml|yml|lua|sql|go|rs|java|txt|csv)\b"
)
_CONSTRAINT = re.compile(
    r"\b(must|never|always|do not|don't|only|exactly|constraint|required?|"
    r"correction|instead|not per|rather than|keep)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(decision|decided|decide|choose|chose|we will|i will use|go with|"
    r"agreed)\b",
    re.I,
)
_FIX = re.compile(r"\b(fix|fixed|fixes|resolved|the cause|root cause|found it)\b", re.I)
_TODO = re.compile(
    r"\b(todo|open task|next step|remaining|left to do|follow[- ]up|tomorrow|"
    r"still open|not yet)\b",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]+|\d[\d.,:]*")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "which",
        "will",
        "with",
        "you",
        "your",
        "me",
        "my",
        "he",
        "she",
        "his",
        "her",
        "them",
        "us",
        "do",
        "did",
        "does",
        "done",
        "not",
        "no",
        "yes",
        "can",
        "could",
        "would",
        "should",
        "just",
        "also",
        "than",
        "too",
        "very",
        "about",
        "after",
        "before",
        "up",
        "out",
        "over",
        "all",
        "any",
        "some",
        "more",
        "most",
        "other",
        "such",
        "only",
        "own",
        "same",
    ]
)

# Anchor kinds in the order they are kept when a budget forces a cut.
_PRIORITY = {
    "constraint": 0,
    "correction": 0,
    "decision": 1,
    "error": 2,
    "fix": 2,
    "todo": 3,
    "tool": 4,
    "files": 5,
    "salient": 6,
}


def _anchor_kind(message: Message) -> str | None:
    kind = (message.meta or {}).get("kind")
    if kind in _PRIORITY:
        return str(kind)
    if message.type == "observation" and message.is_error:
        return "error"
    if message.type == "user" and _CONSTRAINT.search(message.text):
        return "constraint"
    if message.type in ("assistant", "thought", "user") and _DECISION.search(message.text):
        return "decision"
    if message.type in ("assistant", "thought") and _FIX.search(message.text):
        return "fix"
    if _TODO.search(message.text):
        return "todo"
    return None


def _first_line(text: str, limit: int = 240) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 3]


class ExtractiveSummarizer:
    """Anchors first, then salient sentences, within a token budget. Deterministic."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.info = SummarizerInfo(
            backend="extractive", model="anchors+salience-v1", prompt_version=PROMPT_VERSION
        )

    def summarize(self, messages: list[Message], budget_tokens: int) -> str:
        lines: list[tuple[int, int, str]] = []  # (priority, order, line)
        order = 0
        files: list[str] = []
        used: set[int] = set()
        for i, m in enumerate(messages):
            files.extend(p for p in _PATH.findall(m.text) if p not in files)
            kind = _anchor_kind(m)
            if m.type == "action":
                outcome = next((o for o in messages[i + 1 :] if o.type == "observation"), None)
                result = f" → {_first_line(outcome.text, 120)}" if outcome else ""
                lines.append(
                    (
                        _PRIORITY["tool"],
                        order,
                        f"- tool #{m.seq}: {_first_line(m.text, 140)}{result}",
                    )
                )
                used.add(m.seq)
            elif kind is not None:
                lines.append(
                    (_PRIORITY[kind], order, f"- {kind} #{m.seq} ({m.type}): {_first_line(m.text)}")
                )
                used.add(m.seq)
            order += 1
        if files:
            lines.append((_PRIORITY["files"], order, f"- files: {', '.join(files[:20])}"))
            order += 1
        for _score, seq, sentence in self._salient(messages, used):
            lines.append((_PRIORITY["salient"], order + seq, f"- #{seq}: {sentence}"))
        return self._fit(lines, budget_tokens)

    def merge(self, summaries: list[str], budget_tokens: int) -> str:
        lines: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        for i, summary in enumerate(summaries):
            for j, line in enumerate(summary.splitlines()):
                if line and line not in seen:
                    seen.add(line)
                    lines.append((self._line_priority(line), i * 10_000 + j, line))
        return self._fit(lines, budget_tokens)

    @staticmethod
    def _line_priority(line: str) -> int:
        match = re.match(r"- (\w+)", line)
        return (
            _PRIORITY.get(match.group(1), _PRIORITY["salient"]) if match else _PRIORITY["salient"]
        )

    def _salient(self, messages: list[Message], used: set[int]) -> list[tuple[float, int, str]]:
        """Sentences of messages not already anchored, scored by the rarity of their words
        within the chunk plus numbers and capitalised names (which answers tend to be)."""
        docs = [
            (m.seq, s)
            for m in messages
            if m.seq not in used and m.type != "action"
            for s in _sentences(m.text)
        ]
        if not docs:
            return []
        frequency = Counter(w.lower() for _, s in docs for w in set(_WORD.findall(s)))
        scored = []
        for seq, sentence in docs:
            words = [w for w in _WORD.findall(sentence) if w.lower() not in _STOP]
            if not words:
                continue
            rarity = sum(1.0 / frequency[w.lower()] for w in words)
            names = sum(1 for w in words if w[0].isupper() or w[0].isdigit())
            score = (rarity + 0.5 * names) / math.sqrt(len(words) + 1)
            scored.append((score, seq, _first_line(sentence, 200)))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return scored

    def _fit(self, lines: list[tuple[int, int, str]], budget_tokens: int) -> str:
        """Keep lines by priority (then order) while they fit; an anchor that does not fit
        whole is kept cut short rather than dropped. Print in original order."""
        kept: list[tuple[int, int, str]] = []
        used = 0
        for priority, order, line in sorted(lines, key=lambda x: (x[0], x[1])):
            cost = self.counter.count(line) + 1
            left = budget_tokens - used
            if cost > left and priority <= _PRIORITY["todo"] and left > 12:
                line = self.counter.truncate(line, left - 2) + "…"
                cost = self.counter.count(line) + 1
            if cost <= left:
                kept.append((priority, order, line))
                used += cost
        kept.sort(key=lambda x: x[1])
        return "\n".join(line for _, _, line in kept)

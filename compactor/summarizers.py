"""Summarizers: a small protocol, and the local, deterministic extractive summarizer.

A summarizer turns a chunk of messages into a summary (``summarize``) and several summaries into
one (``merge``). Every summarizer fills the same structure (``projections.fitting.SECTIONS``):
the user's requests and corrections, verbatim and first; the goal and open tasks; decisions;
errors and their fixes; the files touched; the work done (commands run, code changed); notes;
and where the work stopped. A continuing agent reads it in place of the messages it covers.

The extractive summarizer builds that structure from the messages themselves: user messages
become requests, tool calls are paired with their results by ``action_id`` (parallel calls
never get each other's results), file paths come from the tools' parameters, errors are matched
with the fix that followed. Its merge joins the sections of several summaries (files by path,
requests in order) and, when the budget forces a cut, drops whole bullets, least important
section first, and within a section the middle of the range before its newest and oldest ends.
It is a pure function of its input: the same messages give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from compactor.detectors import any_word
from eventlog.schema import SummarizerInfo
from projections.fitting import balanced, fit_summary, parse_sections, render_sections
from projections.tokens import TokenCounter

PROMPT_VERSION = "sections-v2"


@dataclass(frozen=True, slots=True)
class Message:
    """A message as a summarizer sees it (``text`` already capped to the message limit)."""

    seq: int
    type: str
    text: str
    meta: dict | None = None
    is_error: bool = False
    tool: str | None = None
    id: str | None = None
    action_id: str | None = None
    params: dict[str, Any] | None = field(default=None, hash=False)


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
    r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.\w+|\b[\w-]+\.(?:py|md|ts|tsx|js|jsx|json|toml|yaml|yml|"
    r"lua|sql|go|rs|java|txt|csv|ex|exs|rb|c|h|cpp|sh)\b"
)
_DECISION = any_word(
    "decision",
    "decided",
    "decide",
    "choose",
    "chose",
    "we will",
    "i will use",
    "i'll use",
    "go with",
    "agreed",
    "instead of",
    "rather than",
    "because",
)
_FIX = any_word(
    "fix",
    "fixed",
    "fixes",
    "fixing",
    "resolved",
    "the cause",
    "root cause",
    "found it",
    "the problem",
    "the issue",
)
_STATED_TASK = "- open, said at "  # a task a request named (a todo list's items are "- [")
_OPEN_TASK = any_word(
    "todo", "still need to", "still needs to", "next,? we", "left open", "open task", "not done yet"
)
_SENTENCE = re.compile(r"(?<=[.!?:])\s+(?=[A-Z0-9\"'(`])|\n+")
_MACHINE = re.compile(r"^\s*<([a-z][\w-]*)>")  # <task-notification>, <command-name>, ...
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file")
_COMMAND_KEYS = ("command", "cmd", "script")
_VERBS = (
    ("read", "read"),
    ("view", "read"),
    ("cat", "read"),
    ("grep", "searched"),
    ("glob", "searched"),
    ("search", "searched"),
    ("write", "written"),
    ("create", "written"),
    ("edit", "edited"),
    ("replace", "edited"),
    ("patch", "edited"),
)
_FILE_LINE = re.compile(r"^- (\S.*?) \(([^)]*)\)$")
# Names in code: dotted modules, snake_case, CamelCase, :atoms, name/arity; issue ids
# (PROJ-123, proj-abc.2).
_NAME = re.compile(
    r"(?<![\w./-])(?:[A-Z][A-Z0-9]+-\d+|[a-z][a-z0-9]*-[a-z0-9]{2,}(?:\.\d+)+|"
    r"[A-Z]\w*(?:\.[A-Z]\w*)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+[?!]?|"
    r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|:[a-z][a-z0-9_]+[?!]?|[a-z_]\w*[?!]?/\d)(?![\w/-])"
)
_NAMES_PER_LINE = 12
REQUEST_ROOM = 600  # tokens of verbatim requests a summary keeps even under a smaller budget
MIN_REQUEST_TOKENS = 48  # a long request is never shortened below this


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _first_sentences(text: str, limit: int) -> str:
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    out = ""
    for sentence in sentences:
        joined = f"{out} {sentence}".strip()
        if len(joined) > limit:
            break
        out = joined
    return _one_line(out or text, limit)


def _verb(tool: str) -> str:
    name = tool.lower()
    return next((verb for key, verb in _VERBS if key in name), "used")


def _relative(path: str, meta: dict | None) -> str:
    cwd = (meta or {}).get("cwd")
    if isinstance(cwd, str) and cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _param(params: dict | None, keys: Iterable[str]) -> str | None:
    for key in keys:
        value = (params or {}).get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _added_lines(params: dict) -> list[str]:
    """The code lines an edit or write introduced (new lines that were not there before)."""
    pairs: list[tuple[str, str]] = []
    if isinstance(params.get("new_string"), str):
        pairs.append((str(params.get("old_string") or ""), params["new_string"]))
    for edit in params.get("edits") or []:
        if isinstance(edit, dict) and isinstance(edit.get("new_string"), str):
            pairs.append((str(edit.get("old_string") or ""), edit["new_string"]))
    if not pairs and isinstance(params.get("content"), str):
        pairs.append(("", params["content"]))
    added = []
    for old, new in pairs:
        before = {line.strip() for line in old.splitlines()}
        for line in new.splitlines():
            stripped = line.strip()
            if len(stripped) > 3 and stripped not in before and stripped not in added:
                added.append(stripped)
    return added


@dataclass(slots=True)
class _FileUse:
    verbs: dict[str, int] = field(default_factory=dict)
    first: int = 0
    last: int = 0

    def add(self, verb: str, seq: int, times: int = 1, last: int | None = None) -> None:
        self.verbs[verb] = self.verbs.get(verb, 0) + times
        self.first = min(self.first, seq) if self.first else seq
        self.last = max(self.last, last if last is not None else seq)

    def line(self, path: str) -> str:
        verbs = ", ".join(f"{verb} x{n}" if n > 1 else verb for verb, n in self.verbs.items())
        where = f"#{self.first}" if self.first == self.last else f"#{self.first}-#{self.last}"
        return f"- {path} ({verbs}; {where})"


def _parse_file_line(line: str) -> tuple[str, _FileUse] | None:
    match = _FILE_LINE.match(line)
    if not match:
        return None
    path, inside = match.groups()
    verbs_part, _, where = inside.rpartition("; ")
    seqs = [int(n) for n in re.findall(r"#(\d+)", where)]
    if not seqs:
        return None
    use = _FileUse()
    for part in verbs_part.split(", "):
        verb, _, times = part.partition(" x")
        use.verbs[verb] = use.verbs.get(verb, 0) + (int(times) if times.isdigit() else 1)
    use.first, use.last = min(seqs), max(seqs)
    return path, use


def _seq_of(bullet: str) -> int:
    match = re.match(r"- #(\d+)", bullet)
    return int(match.group(1)) if match else 0


def _name_lines(names: list[str]) -> list[str]:
    return [
        "- " + ", ".join(names[i : i + _NAMES_PER_LINE])
        for i in range(0, len(names), _NAMES_PER_LINE)
    ]


def _names_of(line: str) -> list[str]:
    return [n.strip() for n in line.removeprefix("- ").split(", ") if n.strip()]


class ExtractiveSummarizer:
    """The structured summary, extracted from the messages (see the module). Deterministic."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.info = SummarizerInfo(
            backend="extractive", model="sections-v2", prompt_version=PROMPT_VERSION
        )

    # ------------------------------------------------------------------ one chunk

    def summarize(self, messages: list[Message], budget_tokens: int) -> str:
        """A summary of ``messages`` within ``budget_tokens``, from their own sentences."""
        sections: dict[str, list[str]] = {}
        files: dict[str, _FileUse] = {}
        answer = self._pair(messages)
        requests = [m for m in messages if m.type == "user" and not _MACHINE.match(m.text)]
        request_seqs = {m.seq for m in requests}
        for m in messages:
            if m.seq in request_seqs:
                sections.setdefault("Requests and corrections", []).append(self._request(m))
                self._stated(m, sections)
            elif m.type == "action":
                self._action(m, answer.get(m.seq), sections, files)
            elif m.type in ("assistant", "thought"):
                self._said(m, messages, sections)
            for path in _PATH.findall(m.text) if m.type in ("user", "assistant") else ():
                files.setdefault(_relative(path, m.meta), _FileUse()).add("mentioned", m.seq)
        if requests:
            goal = requests[-1]
            sections.setdefault("Goal and open tasks", []).insert(
                0, f"- goal: the latest request, #{goal.seq}: {_one_line(goal.text, 60)}"
            )
        if files:
            sections["Files"] = [use.line(path) for path, use in files.items()]
        sections["Names"] = self._names(messages)
        sections["Where the work stopped"] = self._stopped(messages, answer)
        return self._fit(sections, budget_tokens)

    @staticmethod
    def _names(messages: list[Message]) -> list[str]:
        """The names of code the agent wrote or talked about, most used first (in how many
        messages); tool results are left out, they hold whole files the agent only read."""
        seen: dict[str, int] = {}
        for m in messages:
            if m.type == "observation":
                continue
            if m.params is not None:  # what an action wrote or ran, not its parameter names
                source = " ".join(_added_lines(m.params)) or _param(m.params, _COMMAND_KEYS) or ""
            else:
                source = m.text
            for name in set(_NAME.findall(source)):
                seen[name] = seen.get(name, 0) + 1
        ranked = sorted(seen, key=lambda n: (-seen[n], n))
        return _name_lines(ranked)

    @staticmethod
    def _pair(messages: list[Message]) -> dict[int, Message]:
        """Each action's observation: the one whose ``action_id`` names it; an observation
        without one answers the nearest earlier action not yet answered."""
        by_id = {m.id: m for m in messages if m.type == "action" and m.id}
        answer: dict[int, Message] = {}
        for i, m in enumerate(messages):
            if m.type != "observation":
                continue
            action = by_id.get(m.action_id) if m.action_id else None
            if action is None and not m.action_id:
                action = next(
                    (
                        a
                        for a in reversed(messages[:i])
                        if a.type == "action" and a.seq not in answer
                    ),
                    None,
                )
            if action is not None and action.seq not in answer:
                answer[action.seq] = m
        return answer

    @staticmethod
    def _stated(m: Message, sections: dict[str, list[str]]) -> None:
        """What a request says was decided, or is still to do: a bullet of its section too, so
        a chat's decisions and open tasks are where a reader looks for them."""
        for sentence in (s.strip() for s in _SENTENCE.split(m.text)):
            if len(sentence) <= 12:
                continue
            if _OPEN_TASK.search(sentence):
                sections.setdefault("Goal and open tasks", []).append(
                    f"{_STATED_TASK}#{m.seq}: {_one_line(sentence, 160)}"
                )
            elif _DECISION.search(sentence):
                sections.setdefault("Decisions", []).append(
                    f"- #{m.seq}: {_one_line(sentence, 240)}"
                )

    def _request(self, m: Message) -> str:
        lines = m.text.strip().splitlines() or [""]
        return "\n".join([f"- #{m.seq}: {lines[0]}", *(f"  {line}" for line in lines[1:])])

    def _action(
        self,
        m: Message,
        result: Message | None,
        sections: dict[str, list[str]],
        files: dict[str, _FileUse],
    ) -> None:
        params = m.params or {}
        tool = m.tool or "tool"
        todos = params.get("todos")
        if isinstance(todos, list):
            open_tasks = [
                f"- [{t.get('status', 'pending')}] {_one_line(str(t.get('content', '')), 160)}"
                for t in todos
                if isinstance(t, dict) and t.get("status") != "completed"
            ]
            goal = sections.setdefault("Goal and open tasks", [])
            goal[:] = [g for g in goal if not g.startswith("- [")] + open_tasks
            return
        path = _param(params, _PATH_KEYS)
        command = _param(params, _COMMAND_KEYS)
        outcome = ""
        if result is not None and result.is_error:
            error = _one_line(result.text.removeprefix("ERROR: "), 100)
            target = _one_line(command or path or m.text, 60)
            sections.setdefault("Errors and fixes", []).append(
                f"- #{m.seq} {tool} {target} failed (#{result.seq}): {error}"
            )
            outcome = " → failed"
        if path:
            rel = _relative(path, m.meta)
            verb = _verb(tool)
            files.setdefault(rel, _FileUse()).add(verb, m.seq)
            added = _added_lines(params) if verb in ("edited", "written") else []
            if added:  # the lines that name the most code, in their order
                best = sorted(added, key=lambda line: -len(_NAME.findall(line)))[:2]
                shown = " | ".join(_one_line(line, 80) for line in added if line in best)
                more = f" (+{len(added) - len(best)} lines)" if len(added) > len(best) else ""
                sections.setdefault("Work done", []).append(
                    f"- #{m.seq} {verb} {rel}: {shown}{more}{outcome}"
                )
        elif command:
            done = ""
            if result is not None and not result.is_error and result.text.strip():
                done = f" → {_one_line(result.text.strip().splitlines()[-1], 60)}"
            sections.setdefault("Work done", []).append(
                f"- #{m.seq} {tool}: {_one_line(command, 160)}{done or outcome}"
            )
        elif not params or tool.lower() not in ("grep", "glob", "search"):
            sections.setdefault("Work done", []).append(
                f"- #{m.seq} {_one_line(m.text, 160)}{outcome}"
            )

    def _said(self, m: Message, messages: list[Message], sections: dict[str, list[str]]) -> None:
        text = m.text.strip()
        if not text:
            return
        for sentence in (s.strip() for s in _SENTENCE.split(text)):
            if _DECISION.search(sentence) and len(sentence) > 12:
                sections.setdefault("Decisions", []).append(
                    f"- #{m.seq}: {_one_line(sentence, 240)}"
                )
                break
        errors = sections.get("Errors and fixes", [])
        if errors and _FIX.search(text) and "→ fix" not in errors[-1]:
            errors[-1] += f" → fix #{m.seq}: {_first_sentences(text, 200)}"
        if m.type == "assistant":
            sections.setdefault("Notes", []).append(f"- #{m.seq}: {_first_sentences(text, 240)}")

    @staticmethod
    def _stopped(messages: list[Message], answer: dict[int, Message]) -> list[str]:
        lines = []
        said = next((m for m in reversed(messages) if m.type in ("assistant", "thought")), None)
        if said is not None:
            lines.append(f"- #{said.seq} ({said.type}): {_first_sentences(said.text, 300)}")
        action = next((m for m in reversed(messages) if m.type == "action"), None)
        if action is not None:
            result = answer.get(action.seq)
            state = (
                "(its result comes after this part)"
                if result is None
                else ("failed: " if result.is_error else "→ ")
                + _one_line(result.text.removeprefix("ERROR: "), 100)
            )
            lines.append(f"- last tool call #{action.seq}: {_one_line(action.text, 160)} {state}")
        return lines

    # ------------------------------------------------------------------ merging

    def merge(self, summaries: list[str], budget_tokens: int) -> str:
        """One summary of several, within ``budget_tokens``: their sections merged."""
        merged: dict[str, list[str]] = {}
        files: dict[str, _FileUse] = {}
        names: dict[str, list[int]] = {}  # name -> [-parts listing it, best rank]
        for summary in summaries:
            parsed = parse_sections(summary)
            for title, items in parsed.items():
                if title == "Files":
                    for item in items:
                        found = _parse_file_line(item)
                        if found is None:
                            merged.setdefault("Notes", []).append(item)
                            continue
                        path, use = found
                        mine = files.setdefault(path, _FileUse())
                        for verb, times in use.verbs.items():
                            mine.add(verb, use.first, times, use.last)
                elif title == "Names":
                    for rank, name in enumerate(n for item in items for n in _names_of(item)):
                        score = names.setdefault(name, [0, rank])
                        score[0] -= 1  # listed by one more part
                        score[1] = min(score[1], rank)
                elif title == "Goal and open tasks":  # the newest part's, and every task said
                    said = [i for i in merged.get(title, []) if i.startswith(_STATED_TASK)]
                    merged[title] = said + [i for i in items if i not in said]
                elif title == "Where the work stopped":
                    merged[title] = list(items)  # the newest part's
                else:
                    target = merged.setdefault(title, [])
                    target.extend(item for item in items if item not in target)
        if files:
            merged["Files"] = [use.line(path) for path, use in files.items()]
        if names:
            merged["Names"] = _name_lines(sorted(names, key=lambda n: (*names[n], n)))
        return self._fit(merged, budget_tokens)

    # ------------------------------------------------------------------ the budget

    def _fit(self, sections: dict[str, list[str]], budget_tokens: int) -> str:
        """Requests are anchors, kept verbatim in a room of their own: half the budget, and at
        least ``REQUEST_ROOM`` tokens even when the budget is smaller. Over that room, long
        requests are shortened to their first words (they say so, and keep their #seq); a
        stream of many short requests (a chat) keeps its newest and oldest, and one bullet names
        the range left to the log. The other sections then keep whole bullets by priority
        (``fit_summary``) in what is left."""
        title = "Requests and corrections"
        requests = sections.pop(title, [])
        room = max(budget_tokens // 2, REQUEST_ROOM)
        cap = 400
        while self._cost(requests) > room and cap >= MIN_REQUEST_TOKENS:
            requests = [self._shorten(r, cap) for r in requests]
            cap = cap * 2 // 3
        if self._cost(requests) > room:
            requests = self._keep_ends(requests, room)
        rest = fit_summary(sections, max(0, budget_tokens - self._cost(requests)), self.counter)
        return render_sections({title: requests, **rest} if requests else rest)

    def _cost(self, bullets: list[str]) -> int:
        return sum(self.counter.count(b) + 1 for b in bullets)

    def _keep_ends(self, requests: list[str], room: int) -> list[str]:
        """The newest and oldest requests that fit ``room``, and a bullet naming the others."""
        kept: set[int] = set()
        used = 20  # the bullet naming what is left out
        for index in balanced(requests):
            cost = self.counter.count(requests[index]) + 1
            if used + cost <= room:
                kept.add(index)
                used += cost
        left = [r for i, r in enumerate(requests) if i not in kept]
        seqs = [int(m.group(1)) for r in left if (m := re.match(r"- #(\d+)", r))]
        out = [r for i, r in enumerate(requests) if i in kept]
        if seqs:
            note = f"- #{min(seqs)}-#{max(seqs)}: {len(left)} more user messages, in the log"
            position = next((i for i, r in enumerate(out) if _seq_of(r) > min(seqs)), len(out))
            out.insert(position, note)
        return out

    def _shorten(self, bullet: str, cap: int) -> str:
        if self.counter.count(bullet) <= cap:
            return bullet
        words = self.counter.truncate(" ".join(bullet.split()), cap)
        cut = words.rsplit(None, 1)[0] if " " in words else words
        return f"{cut} …"

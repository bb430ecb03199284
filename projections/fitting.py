"""Fitting text into token budgets without cutting what a reader relies on.

Two things are cut here, and only here:

- **One message** (``elide``): a message over its cap keeps its head and tail, and a marker says
  what was cut and how to read it whole: ``[#812: 14,203 tokens elided; airsspec replay S --from
  812 --until 812]``. Cuts fall between lines. JSON (an action's ``tool({...})`` or a JSON result)
  is shortened inside its longest string values, so it stays valid JSON; one line longer than
  the whole budget is cut between words.
- **A summary** (``fit_summary``): the structured summary every summarizer writes (``SECTIONS``)
  loses whole bullets, least important section first, never part of one. The user's requests
  are anchors: they are the last thing to go.

Nothing here ever ends a text inside a token, a line of JSON or a bullet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from projections.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a structured summary: its heading and how long it survives a cut (lower
    ``priority`` is kept longer)."""

    title: str
    priority: int


# The structure every summarizer fills, in the order it is printed.
SECTIONS: tuple[Section, ...] = (
    Section("Requests and corrections", 0),
    Section("Goal and open tasks", 1),
    Section("Decisions", 2),
    Section("Errors and fixes", 2),
    Section("Files", 3),
    Section("Names", 3),
    Section("Work done", 4),
    Section("Notes", 5),
    Section("Where the work stopped", 1),
)
SECTION_TITLES = tuple(s.title for s in SECTIONS)
_PRIORITY = {s.title: s.priority for s in SECTIONS}
_HEADING = re.compile(r"^## (.+?)\s*$")


def marker(seq: int, session: str, elided_tokens: int) -> str:
    """The note that replaces what was cut from message ``seq``."""
    return (
        f"[#{seq}: {elided_tokens:,} tokens elided; "
        f"airsspec replay {session} --from {seq} --until {seq}]"
    )


def elide(
    text: str,
    limit: int,
    counter: TokenCounter,
    *,
    seq: int,
    session: str,
    tokens: int | None = None,
) -> str:
    """``text`` if it fits ``limit`` tokens; else its head and tail and a marker (see module).
    The result never exceeds ``limit`` unless the marker alone does. ``tokens``: the count of
    ``text``, when the caller has it already."""
    if tokens is None and counter.within(text, limit):
        return text
    total = counter.count(text) if tokens is None else tokens
    if total <= limit:
        return text
    room = limit - counter.count(marker(seq, session, total)) - 1
    while room > 0:
        cut = _shorten_json(text, room, counter) or _head_and_tail(text, room, counter)
        elided = max(total - counter.count(cut), 1)
        result = f"{cut}\n{marker(seq, session, elided)}" if cut else marker(seq, session, total)
        if counter.count(result) <= limit:
            return result
        room -= max(1, (counter.count(result) - limit))
    return marker(seq, session, total)


_MARKER = re.compile(r"\[#(\d+): [\d,]+ tokens elided; airsspec replay ")


def elided_seqs(context: str | list[dict[str, Any]]) -> list[int]:
    """The seqs of the messages a context (text or ``messages``) shows cut, by their markers."""
    text = context if isinstance(context, str) else orjson.dumps(context).decode()
    return sorted({int(seq) for seq in _MARKER.findall(text)})


_CALL = re.compile(r"^([\w.:-]+)\((.*)\)$", re.S)


def _shorten_json(text: str, room: int, counter: TokenCounter) -> str | None:
    """``text`` (JSON, or ``tool(JSON)``) with its longest strings cut, still valid JSON; None
    if it is not JSON or cannot be made to fit this way."""
    call = _CALL.match(text)
    prefix, body = (call.group(1), call.group(2)) if call else ("", text)
    if body[:1] not in ("{", "["):
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None

    def render(v: Any) -> str:
        dumped = orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
        return f"{prefix}({dumped})" if call else dumped

    for _ in range(64):
        rendered = render(value)
        if counter.count(rendered) <= room:
            return rendered
        leaves = _string_leaves(value)
        if not leaves:
            return None
        path, longest = max(leaves, key=lambda leaf: len(leaf[1]))
        if len(longest) <= 40:
            return None
        keep = len(longest) // 2
        head, tail = longest[: keep * 2 // 3], longest[len(longest) - keep // 3 :]
        value = _replace(value, path, f"{head} … {tail}")
    return None


def _string_leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _string_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _string_leaves(v, (*path, i))]
    return []


def _replace(value: Any, path: tuple, new: str) -> Any:
    if not path:
        return new
    if isinstance(value, dict):
        return {k: (_replace(v, path[1:], new) if k == path[0] else v) for k, v in value.items()}
    return [(_replace(v, path[1:], new) if i == path[0] else v) for i, v in enumerate(value)]


def pack(
    items: Iterable[str], room: int, counter: TokenCounter, *, skip: bool = False
) -> list[str]:
    """The items, in the order given, while they fit ``room`` tokens (each costs one more, for
    the newline that joins it); with ``skip``, an item that does not fit is passed over instead
    of ending the packing."""
    kept: list[str] = []
    used = 0
    for item in items:
        cost = counter.count(item) + 1
        if used + cost > room:
            if skip:
                continue
            break
        kept.append(item)
        used += cost
    return kept


def _head_and_tail(text: str, room: int, counter: TokenCounter) -> str:
    """Whole lines from the start (two thirds of ``room``) and from the end (the rest); a
    first line too long on its own is cut between words, and so is the last when it is that
    line (a question at the end of a long paste survives)."""
    lines = text.split("\n")
    head_room = room * 2 // 3
    head = pack(lines, head_room, counter)
    if not head:
        words = counter.truncate(lines[0], head_room)
        cut = words.rsplit(None, 1)[0] if " " in words.strip() else words
        end = _last_words(lines[-1], room - head_room, counter) if len(lines) == 1 else ""
        return f"{cut} … {end}".rstrip() if cut else ""
    tail = pack(reversed(lines[len(head) :]), room - head_room, counter)
    return "\n".join([*head, "…", *reversed(tail)])


def _last_words(line: str, room: int, counter: TokenCounter) -> str:
    """The longest run of whole words ending ``line`` within ``room`` tokens."""
    words = line.split(" ")
    low, high = 0, len(words)  # words[high:] fits: find the first start that does
    while low < high:
        middle = (low + high) // 2
        if counter.count(" ".join(words[middle:])) <= room:
            high = middle
        else:
            low = middle + 1
    return " ".join(words[high:])


# ----------------------------------------------------------------------------- summaries


def parse_sections(summary: str) -> dict[str, list[str]]:
    """A structured summary's bullets by section title (a bullet keeps its continuation lines;
    text outside any known section goes to ``Notes``)."""
    sections: dict[str, list[str]] = {}
    current = "Notes"
    for line in summary.splitlines():
        heading = _HEADING.match(line)
        if heading and heading.group(1) in _PRIORITY:
            current = heading.group(1)
            sections.setdefault(current, [])
            continue
        if not line.strip():
            continue
        items = sections.setdefault(current, [])
        if line.startswith(("  ", "\t")) and items:
            items[-1] += "\n" + line
        else:
            items.append(line)
    return sections


def render_sections(sections: dict[str, list[str]]) -> str:
    """The summary text of ``sections``, in the fixed order; empty sections are left out."""
    blocks = []
    for title in SECTION_TITLES:
        items = sections.get(title)
        if items:
            blocks.append("\n".join([f"## {title}", *items]))
    return "\n".join(blocks)


def balanced(items: list[str]) -> list[int]:
    """The order in which ``items`` (oldest first) are kept when a budget forces a cut: two of
    the newest for each of the oldest, so recent work is kept first without losing the start."""
    order: list[int] = []
    low, high = 0, len(items) - 1
    while low <= high:
        for _ in range(2):
            if low <= high:
                order.append(high)
                high -= 1
        if low <= high:
            order.append(low)
            low += 1
    return order


def fit_summary(
    sections: dict[str, list[str]], budget: int, counter: TokenCounter
) -> dict[str, list[str]]:
    """The bullets of ``sections`` that fit ``budget`` tokens once rendered: whole bullets,
    kept by section priority, then newest and oldest before the middle (``balanced``)."""
    ranked: list[tuple[int, int, str, int]] = []  # (priority, rank, section, index)
    for title, items in sections.items():
        for rank, index in enumerate(balanced(items)):
            ranked.append((_PRIORITY.get(title, 5), rank, title, index))
    ranked.sort(key=lambda r: (r[0], r[1], SECTION_TITLES.index(r[2]) if r[2] in _PRIORITY else 99))
    kept: dict[str, set[int]] = {}
    used = 0
    for _priority, _rank, title, index in ranked:
        cost = counter.count(sections[title][index]) + 1 + (0 if title in kept else 6)
        if used + cost > budget:
            continue
        kept.setdefault(title, set()).add(index)
        used += cost
    result = {
        title: [item for i, item in enumerate(items) if i in kept.get(title, ())]
        for title, items in sections.items()
    }
    while counter.count(render_sections(result)) > budget:  # merges across joins: drop more
        title = max(
            (t for t in result if result[t]), key=lambda t: (_PRIORITY.get(t, 5), len(result[t]))
        )
        drop = balanced(result[title])[-1]
        result[title] = [x for i, x in enumerate(result[title]) if i != drop]
    return result

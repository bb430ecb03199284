"""What a Claude Code session is told about the project's memory, within a token budget.

``briefing`` is the SessionStart context: a header, then what every door starts from (the
context builder's briefing, ``projections.context``: for a new session ``Memory.context``, the
memory block, the facts the latest sessions left (open tasks, what they decided and required)
and the latest summaries of earlier sessions; for one that resumes or was just compacted by
Claude Code, ``Memory.memory_block``: the memory and facts blocks alone, since Claude Code holds
or has just summarised its messages), then one line per earlier session (when, how it ended, its
task). Never raw messages; never more than the budget, counted with the workspace's token
counter. ``recalled`` is what a prompt gets: passages found for it in other sessions, within its
own small budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airsspec.memory import MEMORY_SESSION

if TYPE_CHECKING:
    from airsspec.memory import Memory, SessionInfo, TokenCounter

HEADER = (
    "airsspec memory of this project (learnings, open tasks, decisions, earlier sessions; "
    "`airsspec learnings list` shows every learning):"
)
RECENT = 3  # earlier sessions a starting session sees listed


def _earlier(infos: list[SessionInfo], session: str) -> list[SessionInfo]:
    """The most recent other agent sessions (subagents and airsspec's own log left out)."""
    chosen = [
        i
        for i in infos
        if i.session not in (session, MEMORY_SESSION)
        and not i.session.startswith(f"{session}.")
        and ".agent-" not in i.session
        and i.problem is None
        and i.last_ts
    ]
    chosen.sort(key=lambda i: (i.last_ts or "", i.session), reverse=True)
    return chosen[:RECENT]


def _tail(memory: Memory, infos: list[SessionInfo], session: str) -> list[tuple[str, list[str]]]:
    """The earlier sessions section, as (heading, lines): their open tasks and what they
    decided are the builder's facts block."""
    earlier = _earlier(infos, session)
    about = memory.learnings.list().sessions
    lines = []
    for i in earlier:
        info = about.get(i.session, {})
        ended = f"ended: {info['status']}" if info.get("ended") else "not ended"
        when = (i.last_ts or "")[:16].replace("T", " ")
        task = f": {info['task']}" if info.get("task") else ""
        lines.append(f"- {i.session} ({when}, {ended}){task}")
    return [("## Earlier sessions", lines)]


def _fit(sections: list[tuple[str, list[str]]], limit: int, counter: TokenCounter) -> str:
    """The sections within ``limit`` tokens: the last lines dropped first, whole lines only."""
    kept = [(head, list(lines)) for head, lines in sections if lines]

    def render() -> str:
        return "\n\n".join(f"{head}\n" + "\n".join(lines) for head, lines in kept if lines)

    while kept and counter.count(render()) > limit:
        _, lines = max(kept, key=lambda s: len(s[1]))
        lines.pop()
        kept = [(h, ls) for h, ls in kept if ls]
    return render()


def briefing(memory: Memory, session: str, source: str, budget: int) -> str:
    """The SessionStart context of ``session`` (``source``: startup, resume, clear or
    compact) within ``budget`` tokens; empty when the memory holds nothing to tell."""
    counter = memory.token_counter()
    infos = memory.sessions.list()
    tail = _fit(_tail(memory, infos, session), budget // 3, counter)
    fresh = source in ("startup", "clear") and all(i.session != session for i in infos)
    room = budget - counter.count(HEADER) - counter.count(tail) - 4
    while room > 0:
        main = memory.context(session, room) if fresh else memory.memory_block(session, room)
        assert isinstance(main, str)
        parts = [p for p in (main, tail) if p]
        text = "\n\n".join([HEADER, *parts]) if parts else ""
        over = counter.count(text) - budget
        if over <= 0:
            return text
        room -= max(over, 1)  # tokens can merge across a join
    text = "\n\n".join([HEADER, tail]) if tail else ""
    return text if counter.count(text) <= budget else ""


def recalled(memory: Memory, session: str, prompt: str, budget: int) -> str:
    """Passages of other sessions found for ``prompt``, best first, within ``budget`` tokens
    (the cold tier as it stands: the hooks bring it up to date when a session ends); a
    passage whose text another shown one holds (an anchor and the message it quotes) once."""
    counter = memory.token_counter()
    head = "Recalled from this project's memory (airsspec):"
    text = ""
    shown: list[str] = []
    for hit in memory.search(prompt, k=5, fresh=False)["hits"]:
        if hit["session"] == session or str(hit["session"]).startswith(f"{session}."):
            continue  # this conversation is already in front of Claude
        said = " ".join(hit["text"].split()).casefold()
        if any(said in other or other in said for other in shown):
            continue  # an anchor learning quoting a message shown (or the reverse): once
        shown.append(said)
        where = hit["source"] or f"{hit['session']} #{hit['seq_from']}-{hit['seq_to']}"
        candidate = f"{text or head}\n- [{where}] {hit['text']}"
        if counter.count(candidate) <= budget:
            text = candidate
    return text

"""RealMem's long assistant chats (``../shared/data/realmem-dev``, never copied here) as events
and queries, for session-level recall (``bench/realmem.py``, and the test that checks the
conversion).

One log session per RealMem session (``rmNNN-<uuid>``), one ``user`` or ``assistant`` event per
turn with the RealMem session uuid in ``meta`` (``realmem_session``); every query turn and the
``Assistant`` turn right after it (which quotes the evidence) are left out. The list order is
the true order (a few dates step back a day): a session starts at the later of its date and two
minutes after the previous session's start, its turns a second apart. A query's ``until`` is one
second before its own session starts: only earlier sessions may answer it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "realmem-dev"


@dataclass(frozen=True)
class Query:
    text: str
    category: str
    evidence: tuple[str, ...]  # RealMem session uuids
    until: str  # one second before the query's own session starts


@dataclass(frozen=True)
class Persona:
    name: str
    sessions: list[tuple[str, str, list[dict[str, Any]]]]  # (log session, start ts, events)
    queries: list[Query]


def load(path: Path) -> Persona:
    """One persona's sessions as events and its queries (see the module)."""
    data = json.loads(path.read_text())
    sessions, queries = [], []
    start = datetime.min.replace(tzinfo=UTC)
    for index, raw in enumerate(data["dialogues"]):
        day = datetime.strptime(raw["current_time"][:10], "%Y-%m-%d").replace(tzinfo=UTC)
        start = max(day, start + timedelta(minutes=2))
        turns = raw["dialogue_turns"]
        skipped: set[int] = set()
        for i, turn in enumerate(turns):
            if not turn.get("is_query"):
                continue
            skipped.update((i, i + 1))
            answer = turns[i + 1] if i + 1 < len(turns) else {}
            evidence = tuple(answer.get("memory_session_uuids") or ())
            if evidence:
                until = (start - timedelta(seconds=1)).isoformat()
                queries.append(Query(turn["content"], turn["category_name"], evidence, until))
        uuid = raw["session_uuid"]
        events = [
            {
                "type": turn["speaker"].lower(),
                "content": turn["content"],
                "ts": (start + timedelta(seconds=i)).isoformat(),
                "meta": {"realmem_session": uuid},
            }
            for i, turn in enumerate(turns)
            if i not in skipped and turn["content"].strip()
        ]
        sessions.append((f"rm{index:03d}-{uuid}", start.isoformat(), events))
    return Persona(data["_metadata"]["person_name"], sessions, queries)

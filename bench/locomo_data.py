"""Reading the LoCoMo dev split from ``../shared/data/locomo-dev`` (never copied here).

Turns become log events: ``user`` events whose content is ``"Speaker: text"`` (plus the shared
image's caption when there is one), with ``speaker`` and ``dia_id`` in ``meta`` and the session's
date as ``ts``. Evidence ids are cleaned as the data's README advises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev" / "locomo-dev.json"


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    sessions: list[tuple[str, list[dict]]]  # (session key, events)
    questions: list[Question]

    @property
    def turns(self) -> list[dict]:
        return [event for _, events in self.sessions for event in events]


def _parse_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _clean_evidence(raw: list[str], known: set[str]) -> tuple[str, ...]:
    ids = []
    for item in raw:
        for part in re.split(r"[;\s]+", item):
            match = re.fullmatch(r"D(\d+):0*(\d+)", part.strip())
            if match:
                dia = f"D{match.group(1)}:{match.group(2)}"
                if dia in known and dia not in ids:
                    ids.append(dia)
    return tuple(ids)


def load(path: Path = DATA) -> list[Conversation]:
    conversations = []
    for item in json.loads(path.read_text()):
        conv = item["conversation"]
        keys = sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        )
        sessions = []
        for key in keys:
            start = _parse_date(conv[f"{key}_date_time"])
            events = []
            for i, turn in enumerate(conv[key]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                events.append(
                    {
                        "type": "user",
                        "content": f"{turn['speaker']}: {text}",
                        "ts": (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "meta": {"speaker": turn["speaker"], "dia_id": turn["dia_id"]},
                    }
                )
            sessions.append((key, events))
        known = {e["meta"]["dia_id"] for _, events in sessions for e in events}
        questions = [
            Question(
                q["question"],
                str(q.get("answer", q.get("adversarial_answer", ""))),
                _clean_evidence(q.get("evidence", []), known),
                int(q["category"]),
            )
            for q in item["qa"]
        ]
        conversations.append(Conversation(item["sample_id"], sessions, questions))
    return conversations

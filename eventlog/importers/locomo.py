"""LoCoMo conversations (a JSON list of samples) to events: one session per conversation
session (``<sample_id>.session_<N>``), one ``user`` event per turn with ``speaker`` and
``dia_id`` in ``meta`` and the session's date in ``ts`` (turns 30 s apart, in order).

The source holds many conversations in one nested document, so a unit is a turn serialised on its
own (key order kept); ``export`` gives back each session's turns as a JSON array.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from types import NoneType
from typing import Any

from eventlog.errors import SourceError
from eventlog.importers.sources import Unit

FORMAT = "locomo"
_STEP = timedelta(seconds=30)  # between the turns of a session
_TEXTS = ("speaker", "text", "blip_caption")  # what a turn's event is made of


def _date(text: str, source: str, key: str) -> datetime:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError as exc:
        raise SourceError(source, None, f"{key}: unreadable date {text!r}") from exc


def sessions(data: Any, source: str) -> list[tuple[str, list[Unit], datetime, str]]:
    """(session suffix, turn units, start time, raw date) for every conversation session."""
    if not isinstance(data, list):
        raise SourceError(source, 1, "expected a JSON list of LoCoMo samples")
    found = []
    for n, sample in enumerate(data):
        conv = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conv, dict) or "sample_id" not in sample:
            raise SourceError(source, None, f"sample {n}: no sample_id/conversation")
        if type(sample["sample_id"]) not in (str, int):  # it names sessions
            raise SourceError(source, None, f"sample {n}: sample_id is not text or a number")
        keys = sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        )
        for key in keys:
            raw_date = conv.get(f"{key}_date_time", "")
            turns = conv[key]
            if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
                raise SourceError(
                    source,
                    None,
                    f"sample {n} ({sample['sample_id']}): {key} is not a list of turns",
                )
            if not isinstance(raw_date, str):
                raise SourceError(source, None, f"sample {n}: {key}_date_time is not text")
            for i, turn in enumerate(turns):
                odd = next(
                    (f for f in _TEXTS if type(turn.get(f, "")) not in (str, NoneType)), None
                )
                if odd is not None:  # the event's content is made of them
                    raise SourceError(
                        source, None, f"sample {n}: {key} turn {i + 1}: {odd!r} is not text"
                    )
            units = [
                Unit(i, 0, json.dumps(turn, ensure_ascii=False), turn)
                for i, turn in enumerate(conv[key])
            ]
            start = _date(raw_date, source, key)
            if units and start > datetime.max.replace(tzinfo=UTC) - _STEP * len(units):
                raise SourceError(
                    source, None, f"{key}: its turns would be dated after the year 9999"
                )
            found.append((f"{sample['sample_id']}.{key}", units, start, raw_date))
    return found


def to_events(units: list[Unit], start: datetime, raw_date: str) -> list[dict[str, Any]]:
    """Events for the units of one source, in order."""
    events = []
    for unit in units:
        turn = unit.obj
        text = turn.get("text", "")
        if turn.get("blip_caption"):
            text += f" [shares an image: {turn['blip_caption']}]"
        meta = {
            "speaker": turn.get("speaker"),
            "dia_id": turn.get("dia_id"),
            "session_date": raw_date,
        }
        events.append(
            {
                "type": "user",
                "content": f"{turn.get('speaker')}: {text}",
                "ts": (start + _STEP * unit.index).isoformat(),
                "meta": meta,
            }
        )
    return events

"""Messages API calls kept on the log: a wrapper for ``messages.create`` and an importer.

``CapturedMessages`` stands in for ``client.messages`` or ``client.beta.messages``: its
``create`` sends the request through the SDK as usual and records the body as sent and the
body received (``memory.captures``: ``compaction`` blocks with their ``encrypted_content``,
``context_management.applied_edits``, everything byte for byte) in the session, then returns
the SDK's parsed message. ``import_exchanges`` records calls kept elsewhere (a JSON Lines file
of ``{"request": {...}, "response": {...}}``, one call a line). Either way ``airsspec replay``
shows what the model was sent, and ``memory.captures.request(session, n)`` rebuilds a body
exactly.

    from anthropic import Anthropic
    from airsspec.integrations.messages_capture import CapturedMessages

    messages = CapturedMessages(Anthropic().beta.messages, memory, "s1")
    reply = messages.create(model="claude-sonnet-5-5", max_tokens=1024, messages=history,
                            betas=["compact-2026-01-12"], context_management={...})
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airsspec.errors import InvalidEventError
from airsspec.memory import Memory, Record


class CapturedMessages:
    """``messages`` (the SDK's ``client.messages`` or ``client.beta.messages``) whose calls
    are recorded in ``session`` of ``memory`` (see the module)."""

    def __init__(self, messages: Any, memory: Memory, session: str) -> None:
        self._messages, self._memory, self._session = messages, memory, session

    def create(self, **params: Any) -> Any:
        """``messages.create(**params)``, recorded; the parsed message. A call the API
        refuses raises as it would, recording nothing (nothing was answered)."""
        raw = self._messages.with_raw_response.create(**params)
        self._memory.captures.record(
            self._session, raw.http_request.content, raw.http_response.content
        )
        return raw.parse()


def import_exchanges(memory: Memory, session: str, path: str | Path) -> list[Record]:
    """Record each call of the JSON Lines file ``path`` (``{"request": ..., "response":
    ...}``) in ``session``, in order; every line is checked first, so a bad one records
    nothing (``InvalidEventError`` naming the file, line and field)."""
    exchanges = []
    with Path(path).open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise InvalidEventError(f"{path}:{number}: not JSON ({exc})") from exc
            for field, inner in (("request", "messages"), ("response", "content")):
                body = item.get(field) if isinstance(item, dict) else None
                if not isinstance(body, dict) or not isinstance(body.get(inner), list):
                    raise InvalidEventError(
                        f"{path}:{number}: field {field!r}: a JSON object with a list {inner!r}"
                    )
            try:  # what ``record`` would refuse, before any line is recorded
                memory.captures.check(item["request"], item["response"])
            except InvalidEventError as exc:
                raise InvalidEventError(f"{path}:{number}: {exc}") from exc
            exchanges.append((item["request"], item["response"]))
    recorded: list[Record] = []
    for request, response in exchanges:
        recorded += memory.captures.record(session, request, response)
    return recorded

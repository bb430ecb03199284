"""Captured Messages API calls, a service of the facade (``memory.captures``): what Claude was
actually sent, and what it answered, kept on the log so ``replay`` shows it and any request can
be rebuilt byte for byte.

A conversation with server-side compaction or context editing is not its raw turns: the API
answers with a ``compaction`` block (a summary plus an ``encrypted_content`` that must be sent
back unchanged; the API then drops every block before it) and reports
``context_management.applied_edits``. A log of user and assistant text alone cannot say what
the model saw. So each call is recorded as two events of the conversation's session:

- ``messages_request``: the body's JSON text without ``messages`` (``body_params``, where the
  messages went among its keys: ``messages_at``), how many of its messages are the conversation
  the log already holds (``reused``: the previous request's messages and the answer to it,
  compared as the JSON text the SDK sends), and the JSON text of each message it added;
- ``messages_response``: the response body's JSON text as received, with ``compacted`` and
  ``applied_edits`` in the clear for a glance.

Every text is kept exactly (JSON objects keep their key order in text; the SDK encodes with
``json.dumps(ensure_ascii=False, separators=(",", ":"))``, which reads back to the same bytes),
so ``request(session, n)`` gives the n-th body as it was sent, and ``conversation`` the messages
the next request would reuse. The events are sealed with the session's other content under
``[privacy] encrypt`` and forgotten with it; secrets are not redacted from them (the body must
stay byte-exact: an ``encrypted_content`` is opaque), so keep ``encrypt`` on where requests
may hold secrets.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airsspec.errors import InvalidEventError

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.schema import Record


def encode(value: Any) -> str:
    """``value`` as the SDK sends it (``httpx`` encodes JSON bodies so)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _body(data: bytes | str | dict[str, Any], what: str) -> dict[str, Any]:
    """A body as a dict that keeps its key order; ``InvalidEventError`` naming ``what``."""
    if isinstance(data, dict):
        return data
    try:  # decoded as UTF-8 first: the text kept is what was parsed (json.loads takes UTF-16)
        parsed = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidEventError(f"{what}: not a JSON body ({exc})") from exc
    if not isinstance(parsed, dict):
        raise InvalidEventError(f"{what}: a Messages API body is a JSON object")
    return parsed


def _json(value: Any, what: str) -> str:
    """``encode(value)``; ``InvalidEventError`` naming ``what`` for a value JSON has no text
    for (a NaN, an Infinity, a number past a float's range as parsed, bytes...): the log
    would hold a body no later call could encode again."""
    try:
        return encode(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidEventError(f"{what}: not JSON ({exc})") from exc


def _text(data: bytes | str | dict[str, Any], what: str) -> str:
    """A body's JSON text: as received, or a parsed body encoded as the SDK encodes;
    ``InvalidEventError`` naming ``what`` for bytes that are not UTF-8 (JSON in UTF-16 parses)."""
    if isinstance(data, dict):
        return _json(data, what)
    try:
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InvalidEventError(f"{what}: not UTF-8 ({exc})") from exc


class Captures:
    """The captured Messages API calls of one open workspace, as its kernel's principal
    reads and writes them (see the module)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def _exchanges(self, session: str) -> list[tuple[Any, Any]]:
        """Each captured request record of ``session`` with the response record after it
        (None: none yet), in log order."""
        found: list[tuple[Any, Any]] = []
        from airsspec.memory.records import replay

        for record in replay(self._kernel, session):
            if record.type == "messages_request":
                found.append((record, None))
            elif record.type == "messages_response" and found and found[-1][1] is None:
                found[-1] = (found[-1][0], record)
        return found

    def conversation(self, session: str, *, upto: int | None = None) -> list[str]:
        """The messages (each as the JSON text it is sent as) that the conversation of
        ``session`` holds after its first ``upto`` captured calls (default: all): the last
        request's messages, then the answer to it as the assistant's turn."""
        messages: list[str] = []
        for request, response in self._exchanges(session)[:upto]:
            messages = messages[: request.reused] + list(request.added)
            if response is not None:
                content = json.loads(response.body)["content"]
                messages.append(encode({"role": "assistant", "content": content}))
        return messages

    def request(self, session: str, n: int) -> bytes:
        """The body of the ``n``-th captured request of ``session`` (1-based), rebuilt from
        the log: byte for byte what was sent."""
        exchanges = self._exchanges(session)
        if not 1 <= n <= len(exchanges):
            raise InvalidEventError(f"{session}: no captured request {n} ({len(exchanges)} kept)")
        record = exchanges[n - 1][0]
        before = self.conversation(session, upto=n - 1)
        messages = before[: record.reused] + list(record.added)
        params = list(json.loads(record.body_params).items())
        at = record.messages_at
        joined = [encode(k) + ":" + encode(v) for k, v in params[:at]]
        joined.append('"messages":[' + ",".join(messages) + "]")
        joined += [encode(k) + ":" + encode(v) for k, v in params[at:]]
        return ("{" + ",".join(joined) + "}").encode("utf-8")

    def check(
        self, request: bytes | str | dict[str, Any], response: bytes | str | dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The request and response bodies of one call, parsed; ``InvalidEventError`` (the
        message naming ``request`` or ``response``) for one ``record`` refuses, so a caller
        with many calls can check them all before recording any."""
        body = _body(request, "request")
        answer = _body(response, "response")
        if not isinstance(body.get("messages"), list):
            raise InvalidEventError("request: field 'messages': a list of messages is required")
        sent = _json(body, "request")
        if not isinstance(request, dict) and sent != _text(request, "request"):
            # kept as parts (``body_params``, messages), a body is given back as the SDK
            # encodes it: other bytes would come back changed
            raise InvalidEventError(
                "request: not JSON as the SDK encodes it (no spaces, no \\u escapes of "
                "printable text, no repeated keys): it could not be given back byte for byte; "
                "pass the parsed body to record it as the SDK would send it"
            )
        blocks = answer.get("content")
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            raise InvalidEventError(
                "response: field 'content': a list of blocks (JSON objects) is required"
            )
        _json(answer, "response")  # each later call encodes its content again
        _text(response, "response")
        return body, answer

    def record(
        self,
        session: str,
        request: bytes | str | dict[str, Any],
        response: bytes | str | dict[str, Any],
    ) -> list[Record]:
        """Record one call in ``session`` (created for this memory's scope when new): the
        request body as sent and the response body as received (bytes, or the parsed JSON:
        it is then encoded as the SDK encodes). A body ``check`` refuses is refused, and so
        is a session this memory may not write to, as for any append."""
        kernel = self._kernel
        body, answer = self.check(request, response)
        from compactor.compactor import file_lock

        # what the session holds decides ``reused``: the read and the append are one step,
        # or two calls recorded at once would each count on a conversation the other changed
        lock = kernel.workspace.layout.lock_path("captures")
        with file_lock(lock, wait=True, holder="captures writer"):
            opening = kernel.gate.opening(session)  # the gate: another owner's is refused
            sent = [encode(m) for m in body["messages"]]
            held = self.conversation(session) if kernel.logged(session) else []
            reused = 0
            while reused < min(len(sent), len(held)) and sent[reused] == held[reused]:
                reused += 1
            keys = list(body)
            params = {k: v for k, v in body.items() if k != "messages"}
            managed = answer.get("context_management")
            edits = (managed.get("applied_edits") if isinstance(managed, dict) else None) or []
            events = [
                {
                    "type": "messages_request",
                    "body_params": encode(params),
                    "messages_at": keys.index("messages"),
                    "reused": reused,
                    "added": sent[reused:],
                },
                {
                    "type": "messages_response",
                    "body": _text(response, "response"),
                    "compacted": any(b.get("type") == "compaction" for b in answer["content"]),
                    "applied_edits": len(edits) if isinstance(edits, list) else 0,
                },
            ]
            return list(kernel.system_append(session, [*opening, *events], keep_secrets=True))

"""The ``anthropic`` summarizer: the official SDK's Messages API.

The key comes from ``ANTHROPIC_API_KEY``. Retries with exponential backoff on 429 and 5xx (and
connection errors) are the SDK's own, bounded by ``max_retries``; a server's ``retry-after``
is honoured. Any failure after that is raised as ``SummarizerError``, so the compactor can fall
back to the extractive summarizer and record why. ``http_client`` exists so tests can drive the
real client code through an HTTP mock transport.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic

from compactor.summarizers import PROMPT_VERSION, Message
from eventlog.errors import SummarizerError
from eventlog.schema import SummarizerInfo
from projections.fitting import SECTION_TITLES

_STRUCTURE = "\n".join(f"## {title}" for title in SECTION_TITLES)
CHUNK_PROMPT = (
    "You compress an AI agent's working history so it can continue its task. Summarize the "
    "messages below in at most {budget} tokens, under exactly these headings, in this order, "
    "leaving out a heading with nothing under it:\n"
    + _STRUCTURE
    + "\nUnder each heading write terse bullet points ('- '), each citing its message numbers "
    "as #seq. Requests and corrections: every user message, verbatim (shorten only a very long "
    "one, keeping its start). Goal and open tasks: what the user wants now and what is left. "
    "Decisions: each with its reason. Errors and fixes: each error with the fix that followed. "
    "Files: one bullet per file, '- path (read, edited; #first-#last)'. Names: the functions, "
    "modules and identifiers the work is about, comma-separated. Work done: commands run and "
    "code changed, with their outcome. Where the work stopped: the last thing said and done. "
    "A tool call's result is the observation whose action_id names it."
)
MERGE_PROMPT = (
    "Merge these summaries of consecutive parts of one AI agent session (oldest first) into one "
    "summary of at most {budget} tokens, under the same headings in the same order. Keep every "
    "request and correction verbatim; keep decisions, open tasks, and errors with their fixes; "
    "join the file bullets by path; keep old and recent work in balance (never drop the newest "
    "part first); take the goal, open tasks and where the work stopped from the newest part. "
    "Keep #seq citations."
)


class AnthropicSummarizer:
    """Summaries from the Anthropic Messages API (falls back to extractive on any failure)."""

    def __init__(
        self,
        *,
        model: str,
        max_tokens: int,
        max_retries: int = 4,
        timeout_s: float = 60.0,
        api_key: str | None = None,
        http_client: Any | None = None,
        base_url: str | None = None,
    ) -> None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        # Without a key every call fails with SummarizerError, so the compactor falls back to
        # the extractive summarizer and records why in the compaction, as for any API failure.
        self.client = (
            anthropic.Anthropic(
                api_key=key,
                max_retries=max_retries,
                timeout=timeout_s,
                http_client=http_client,
                base_url=base_url,
            )
            if key
            else None
        )
        self.model = model
        self.max_tokens = max_tokens
        self.info = SummarizerInfo(backend="anthropic", model=model, prompt_version=PROMPT_VERSION)

    def call(self, system: str, text: str, budget_tokens: int) -> str:
        """One Messages API call: ``system`` as the prompt, ``text`` as the user turn, the
        answer's text; raises ``SummarizerError`` when the API cannot answer."""
        if self.client is None:
            raise SummarizerError("ANTHROPIC_API_KEY is not set")
        try:
            response = self.client.messages.create(
                model=self.model,
                max_tokens=min(self.max_tokens, max(budget_tokens, 16)),
                system=system,
                messages=[{"role": "user", "content": text}],
            )
        except anthropic.APIStatusError as exc:
            raise SummarizerError(f"Anthropic API error {exc.status_code}: {exc.message}") from exc
        except anthropic.APIError as exc:  # connection errors, timeouts, bad responses
            raise SummarizerError(f"Anthropic API unreachable: {exc}") from exc
        parts = [block.text for block in response.content if block.type == "text"]
        if not parts or not "".join(parts).strip():
            raise SummarizerError("Anthropic API returned no text")
        return "".join(parts).strip()

    def summarize(self, messages: list[Message], budget_tokens: int) -> str:
        """A summary of ``messages`` within ``budget_tokens``, written by the model."""
        text = "\n".join(
            f"#{m.seq} [{m.type}{' ERROR' if m.is_error else ''}"
            + (f" id={m.id}" if m.type == "action" and m.id else "")
            + (f" action_id={m.action_id}" if m.action_id else "")
            + f"] {m.text}"
            for m in messages
        )
        return self.call(CHUNK_PROMPT.format(budget=budget_tokens), text, budget_tokens)

    def merge(self, summaries: list[str], budget_tokens: int) -> str:
        """One summary of several, within ``budget_tokens``, written by the model."""
        text = "\n\n".join(f"Part {i}:\n{s}" for i, s in enumerate(summaries, start=1))
        return self.call(MERGE_PROMPT.format(budget=budget_tokens), text, budget_tokens)

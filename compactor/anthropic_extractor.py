"""The ``anthropic`` learnings extractor: the Messages API reads the records, rules stay the net.

The model is asked for a JSON list of learnings, each naming the message it came from; an answer
that is not that list, or names a message that was not given, is a failure, and the extractor
then falls back to the rules and records why (``ExtractorInfo.fallback_from``). The session's
first request is kept verbatim as an identity anchor by the rules, never paraphrased.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from compactor.anthropic_summarizer import AnthropicSummarizer
from compactor.detectors import clip
from compactor.extractor import Found, RulesExtractor, ask_claude
from eventlog.schema import ExtractorInfo, Record

PROMPT_VERSION = "learnings-1"
PROMPT = (
    "You read an AI agent's working session and list what is worth remembering in later "
    "sessions: corrections the user made, preferences ('always', 'never', 'prefer'), habits, "
    "decisions with their reason, errors with the fix that worked, and what the user says about "
    "themself or the project's ground rules. Answer with only a JSON array; each item is "
    '{"kind": "correction|preference|pattern|decision|error_fix|anchor", "text": "one '
    'self-contained sentence", "scope": "session|project|global", "seq": <the #number of the '
    "message it came from>}. An empty array when there is nothing."
)


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Literal["correction", "preference", "pattern", "decision", "error_fix", "anchor"]
    text: str = Field(min_length=1)
    scope: Literal["session", "project", "global"] = "project"
    seq: int


_ITEMS = TypeAdapter(list[_Item])


class AnthropicExtractor:
    """Learnings from the Anthropic Messages API (see the module)."""

    def __init__(self, **client: Any) -> None:
        self.api = AnthropicSummarizer(**client)
        self.info = ExtractorInfo(backend="anthropic", model=self.api.model, version=PROMPT_VERSION)

    def extract(self, records: Sequence[Record], first_request: bool) -> list[Found]:
        """The learnings in ``records`` (see ``compactor.extractor.Backend``)."""
        items, by_seq = ask_claude(self.api, PROMPT, records, _ITEMS, "learnings")
        anchors = [
            f for f in RulesExtractor().extract(records, first_request) if f.scope == "session"
        ]
        return anchors + [
            Found(
                item.kind,
                clip(item.text),
                item.scope,
                by_seq[item.seq].type == "user",
                (by_seq[item.seq],),
            )
            for item in items
        ]

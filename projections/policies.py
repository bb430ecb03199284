"""The projections' tunables, each declared once as a pydantic model that a section of
``airsspec.toml`` extends (``airsspec.settings``): what the cold tier embeds (``IndexPolicy``),
how query_memory scores (``RecallWeights``), the learnings tiers' capacities
(``LearningSettings``). Kept apart from the code that uses them, so reading a unit or a
learning imports no pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from eventlog.schema import Frozen
from projections.units import TOOL_TYPES, ToolEmbed

if TYPE_CHECKING:
    from projections.units import Unit


class IndexPolicy(Frozen):
    """What the cold tier embeds (``[cold]`` in airsspec.toml extends this declaration).
    Messages, summaries, learnings and sources are embedded whole. A tool call or tool output
    (file contents, command output: most of an agent transcript's bytes, and what full-text
    search finds best) is embedded from the first ``tool_head_chars`` characters of its first
    part (``head``), whole (``all``), or not at all (``none``); the rest is full-text only."""

    tool_embed: ToolEmbed = "head"
    tool_head_chars: int = Field(200, ge=1, le=100_000)

    def embedded_text(self, unit: Unit) -> str | None:
        """The text embedded for ``unit``; None when it is only full-text indexed."""
        if unit.kind != "message" or unit.type not in TOOL_TYPES or self.tool_embed == "all":
            return unit.text
        if self.tool_embed == "none" or unit.part > 0:
            return None
        return unit.text[: self.tool_head_chars]


class RecallWeights(Frozen):
    """How query_memory (``projections.recall``) scores a candidate unit, and how many
    candidates each of its searches proposes (``[cold]`` in airsspec.toml extends this
    declaration)."""

    candidates: int = Field(50, ge=1, le=10_000)
    weight_semantic: float = Field(0.25, ge=0)
    weight_focus: float = Field(0.5, ge=0)
    weight_lexical: float = Field(0.25, ge=0)
    weight_recency: float = Field(0.0, ge=0)
    weight_anchor: float = Field(0.1, ge=0)
    # a message whose speaker label ("Caroline: ...") is a name the query asks about
    weight_speaker: float = Field(0.15, ge=0)
    recency_half_life_days: float = Field(30.0, gt=0)
    # hits scoring below this are dropped (never a hit scored 0): an unrelated passage scores
    # about 0.05 (cosine near 0.1, no shared word); see airsspec.toml [cold]
    min_score: float = Field(0.15, ge=0)
    # hits are picked best first, each one's score lowered by this for every hit already picked
    # from its session (or document), a message whose speaker the query names excepted: the top
    # k spans more sessions; see airsspec.toml [cold]
    session_diversity: float = Field(0.3, ge=0)
    # only hits scoring at least this share of the best hit's score are lifted by diversity
    diversity_reach: float = Field(0.3, ge=0, le=1)
    # diversity applies to a query only when at least this share of the message hits it would
    # reorder are conversation turns (user, assistant): a chat's, not an agent's tool calls,
    # their output and its thoughts, whose questions one working session answers
    diversity_dialogue: float = Field(0.75, ge=0, le=1)

    def score(self, parts: dict[str, float]) -> float:
        """A candidate's score from its parts (``semantic``, ``focus``, ``lexical``,
        ``recency``, ``anchor``, ``speaker``)."""
        return (
            self.weight_semantic * parts["semantic"]
            + self.weight_focus * parts["focus"]
            + self.weight_lexical * parts["lexical"]
            + self.weight_recency * parts["recency"]
            + self.weight_anchor * parts["anchor"]
            + self.weight_speaker * parts["speaker"]
        )


class LearningSettings(Frozen):
    """Capacities and horizons of the learnings tiers (the ``[learnings]`` section of
    airsspec.toml extends this declaration)."""

    hot_items: int = Field(20, ge=0, le=1000)
    hot_tokens: int = Field(2000, ge=0)
    warm_items: int = Field(500, ge=0)
    warm_days: float = Field(30.0, gt=0)
    gc_days: float = Field(90.0, gt=0)

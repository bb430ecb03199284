"""The visual tier in a context: pages chosen within a share of the budget, as image blocks.

``context --images`` gives the hot and warm parts as text and the sessions moved to the visual
tier (``projections.visual``) as Anthropic ``image`` content blocks (base64 PNG), each after a
one-line caption naming its library page, session and range (its provenance, as text the model
can cite). A page costs what Claude bills for it (``projections.pages.image_tokens``) plus its
caption's tokens; pages are taken newest session first, whole sessions only, while they fit
``share`` of the budget, so the context with its images never exceeds the budget.

``load_context`` is the design's API: a project's four parts (hot, warm, cold_images,
archive_images), each with its token count.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projections.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class Page:
    """One PNG page of the visual tier, with what it renders and what it costs."""

    session: str
    library_no: int
    file: str
    data: bytes
    image_tokens: int
    covers: str  # "#1-#56"
    ts: str = ""  # the time of the library page it renders (newest sessions are kept first)

    def caption(self) -> str:
        """The text before the image: its provenance."""
        return (
            f"[image: history-{self.library_no:03d}.md of session {self.session}, "
            f"{self.covers}, page {self.file}]"
        )


@dataclass(frozen=True)
class Chosen:
    """Pages that fit, in the order given to the model, and their cost in tokens."""

    pages: list[Page] = field(default_factory=list)
    tokens: int = 0


def page_cost(page: Page, counter: TokenCounter) -> int:
    """What a page costs in a context: its image and its caption."""
    return page.image_tokens + counter.count(page.caption())


def choose(pages: Iterable[Page], room: int, counter: TokenCounter) -> Chosen:
    """The newest sessions' pages whose whole set fits ``room`` tokens (a session's pages go
    together or not at all), oldest first in the result (the order they happened)."""
    by_session: dict[str, list[Page]] = {}
    for page in sorted(pages, key=lambda p: (p.ts, p.library_no, p.file), reverse=True):
        by_session.setdefault(page.session, []).append(page)
    chosen: list[Page] = []
    used = 0
    for session_pages in by_session.values():  # newest session first
        cost = sum(page_cost(p, counter) for p in session_pages)
        if used + cost <= room:
            chosen += session_pages
            used += cost
    chosen.sort(key=lambda p: (p.ts, p.library_no, p.file))
    return Chosen(chosen, used)


def image_blocks(pages: Sequence[Page]) -> list[dict[str, Any]]:
    """Each page as a caption ``text`` block and an ``image`` block (base64 PNG), as the
    Anthropic Messages API takes them (``anthropic.types.ImageBlockParam``)."""
    blocks: list[dict[str, Any]] = []
    for page in pages:
        blocks.append({"type": "text", "text": page.caption()})
        blocks.append(
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(page.data).decode("ascii"),
                },
            }
        )
    return blocks


def with_images(messages: list[dict[str, Any]], pages: Sequence[Page]) -> list[dict[str, Any]]:
    """``messages`` (Anthropic) with ``pages`` first in the first user message (images
    before text read best), or in a user message of their own before them."""
    blocks = image_blocks(pages)
    if not blocks:
        return messages
    if messages and messages[0]["role"] == "user":
        first = {**messages[0], "content": blocks + list(messages[0]["content"])}
        return [first, *messages[1:]]
    return [{"role": "user", "content": blocks}, *messages]


def load_context(
    hot: str,
    warm: Sequence[str],
    cold: Sequence[Page],
    archive: Sequence[Page],
    counter: TokenCounter,
) -> dict[str, Any]:
    """The four parts of a project's context (hot and warm as text, cold and archive as
    image blocks) with the tokens each costs and their total."""
    tokens = {
        "hot": counter.count(hot),
        "warm": sum(counter.count(text) for text in warm),
        "cold_images": sum(page_cost(p, counter) for p in cold),
        "archive_images": sum(page_cost(p, counter) for p in archive),
    }
    return {
        "hot": hot,
        "warm": list(warm),
        "cold_images": image_blocks(cold),
        "archive_images": image_blocks(archive),
        "tokens": {**tokens, "total": sum(tokens.values())},
    }

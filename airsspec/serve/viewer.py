"""The web viewer (placeholder until its pages land)."""

from __future__ import annotations

from typing import Any


def routes(served: Any) -> list[Any]:
    """The viewer's routes."""
    return []

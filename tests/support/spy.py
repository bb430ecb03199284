"""Watching a method being called, without changing what it does."""

from __future__ import annotations

from typing import Any

import pytest


def calls(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> list[Any]:
    """The first argument after ``self`` of each call of ``owner.name`` from now on, in order
    (each call still runs as it would)."""
    seen: list[Any] = []
    real = getattr(owner, name)

    def spied(self: Any, first: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(first)
        return real(self, first, *args, **kwargs)

    monkeypatch.setattr(owner, name, spied)
    return seen

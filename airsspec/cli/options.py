"""Option builders shared by the command modules, beside ``arg`` (``airsspec.cli.common``)."""

from __future__ import annotations

from typing import Any

from airsspec.cli.common import arg


def flag(name: str, help: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A yes-or-no option: ``name`` given means yes (``store_true``), with its ``help``."""
    return arg(name, action="store_true", help=help)

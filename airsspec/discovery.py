"""Finding a workspace's configuration: the one walk up from a folder to the nearest
``airsspec.toml``, shared by the settings (which then load it) and the client (which only needs
the workspace folder: this module imports nothing but the standard library's paths, so a
command that talks to a server stays light)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

CONFIG_NAME = "airsspec.toml"


def configs_above(start: Path) -> Iterator[Path]:
    """Each ``airsspec.toml`` in ``start`` or its parents, nearest first."""
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            yield candidate


def find_config(start: Path) -> Path | None:
    """The nearest ``airsspec.toml`` in ``start`` or its parents."""
    return next(configs_above(start), None)

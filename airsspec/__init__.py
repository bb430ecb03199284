"""airsspec memory: auditable, replayable, rebuildable memory for AI agents.

Import ``Memory`` (or ``AsyncMemory``): it opens a workspace and does everything the ``airsspec``
command does. Every error raised on purpose is an ``AirsspecError``. Names are loaded on first
use, so ``import airsspec`` (and the command line) stays quick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airsspec.errors import (
        AirsspecError,
        InvalidQueryError,
        NoSuchSessionError,
        NotAWorkspaceError,
    )
    from airsspec.memory import AsyncMemory, Memory

__all__ = [
    "AirsspecError",
    "AsyncMemory",
    "InvalidQueryError",
    "Memory",
    "NoSuchSessionError",
    "NotAWorkspaceError",
    "__version__",
]


def _drop_working_directory() -> None:
    """``python -m airsspec`` puts the working directory first on ``sys.path`` and locates the
    package with ``sys.argv[0]`` set to ``-m``: the folder is taken off then, before anything
    else is imported, so a command run inside a cloned repository never imports its modules (an
    ``eventlog.py`` or a ``pydantic.py`` of its own). The ``airsspec`` console script never has
    it on its path; the installed hooks run ``python -P``, which keeps it off from the start
    (the package itself included). A checkout run from its own folder keeps it: the package
    came from there, so that folder is what runs anyway."""
    import os
    import sys

    if sys.argv[:1] != ["-m"] or sys.flags.safe_path or not sys.path:
        return
    here = os.path.realpath(os.getcwd())
    if os.path.realpath(os.path.dirname(os.path.dirname(__file__))) == here:
        return
    if os.path.realpath(sys.path[0] or ".") == here:
        del sys.path[0]


def _check_layers() -> None:
    """Refuse to run on a namesake: ``eventlog``, ``projections`` and ``compactor`` are also
    names of unrelated distributions on the package index (see the README)."""
    from importlib import import_module

    for name in ("eventlog", "projections", "compactor"):
        module = import_module(name)
        if not getattr(module, "AIRSSPEC_LAYER", False):
            raise ImportError(
                f"{getattr(module, '__file__', name)} is not airsspec's {name!r} package but a "
                f"namesake from another distribution; install airsspec in its own virtual "
                "environment"
            )


_drop_working_directory()
_check_layers()

_FROM_MEMORY = {"AsyncMemory", "Memory"}
_FROM_ERRORS = {"AirsspecError", "InvalidQueryError", "NoSuchSessionError", "NotAWorkspaceError"}


def __getattr__(name: str) -> Any:
    if name in _FROM_MEMORY:
        from airsspec import memory

        return getattr(memory, name)
    if name in _FROM_ERRORS:
        from airsspec import errors

        return getattr(errors, name)
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("airsspec-memory")
        except PackageNotFoundError:  # a checkout that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'airsspec' has no attribute {name!r}")

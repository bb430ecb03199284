"""airsspec memory: auditable, replayable, rebuildable memory for AI agents.

Import ``Memory`` (or ``AsyncMemory``): it opens a workspace and does everything the ``airsspec``
command does. Every error raised on purpose is an ``AirsspecError``.
"""

from importlib.metadata import PackageNotFoundError, version

from airsspec.memory import (
    AsyncMemory,
    InvalidQueryError,
    Memory,
    NoSuchSessionError,
    NotAWorkspaceError,
)
from eventlog.errors import AirsspecError

try:
    __version__ = version("airsspec-memory")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AirsspecError",
    "AsyncMemory",
    "InvalidQueryError",
    "Memory",
    "NoSuchSessionError",
    "NotAWorkspaceError",
    "__version__",
]

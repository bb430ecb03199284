"""Every error airsspec raises on purpose, for the top layer (the CLI, the MCP server, the HTTP
API, the hooks) to import: the same classes as ``eventlog.errors``, where they are declared
once, in the lowest layer, so every package can raise them. Each carries its ``exit_code``
and ``http_status``; catch ``AirsspecError`` to catch them all. Every public name of
``eventlog.errors`` (its ``__all__``, written out there so a type checker sees each one) is
re-exported here."""

from __future__ import annotations

from eventlog.errors import *  # noqa: F403  (the names of eventlog.errors.__all__)
from eventlog.errors import __all__ as _names

__all__ = list(_names)

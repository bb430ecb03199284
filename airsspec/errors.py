"""Every error airsspec raises on purpose, for the top layer (the CLI, the MCP server, the HTTP
API, the hooks) to import: the same classes as ``eventlog.errors``, where they are declared
once, in the lowest layer, so every package can raise them. Each carries its ``exit_code``
and ``http_status``; catch ``AirsspecError`` to catch them all."""

from __future__ import annotations

from eventlog.errors import *  # noqa: F403
from eventlog.errors import __all__ as __all__

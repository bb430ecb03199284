"""One TLS context for the tests' HTTP clients.

httpx builds a new context for every ``Client`` unless given one, reloading the system's
certificates each time (about 20 ms of CPU); tests that open a client per request pass this one
as ``verify=`` instead, which checks certificates the same way.
"""

from __future__ import annotations

import ssl

TLS = ssl.create_default_context()

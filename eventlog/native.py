"""The optional C extension ``eventlog._lines``: the append path's inner loop (envelope,
canonical JSON, SHA-256 chain) without the interpreter's per-record work, and ``batch``'s
group commit on a thread that never takes the interpreter lock.

``lines`` is the extension, or None when it is not built (no compiler or OpenSSL headers at
install) or ``AIRSSPEC_PURE_PYTHON=1`` is set; then the pure-Python steps run, which write
the same bytes and keep the same promises (tests hold the two equal), only slower.
"""

from __future__ import annotations

import os
from types import ModuleType

lines: ModuleType | None = None
if os.environ.get("AIRSSPEC_PURE_PYTHON") != "1":
    try:
        from eventlog import _lines as lines
    except ImportError:
        lines = None

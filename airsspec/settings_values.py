"""Which values of an ``airsspec.toml`` section are certain to be what validating them would
give, without the models: the test both ``airsspec.config`` (settings made without pydantic)
and ``airsspec.settings`` (a section made without its validator) apply, from the table emitted
from the models (``settings_table``)."""

from __future__ import annotations

from typing import Any

from airsspec.settings_table import FIELDS, WHOLE


def kept_values(section: str, given: dict[str, Any]) -> dict[str, Any] | None:
    """The values validating ``given`` as ``section`` would give, when it is certain without
    the model that they are the values given (None otherwise): each key is a field holding
    its default (the same type and value; a list for a tuple default, item by item, becomes
    the tuple) or one of a choice's names (``settings_table``). A TOML integer where the
    default is a float is not kept (validation converts it)."""
    if section in WHOLE and given:
        return None
    fields = FIELDS[section]
    kept: dict[str, Any] = {}
    for key, value in given.items():
        if key not in fields:
            return None
        default, names = fields[key]
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        if not _same(value, default) and (type(value) is not str or value not in names):
            return None
        kept[key] = value
    return kept


def _same(value: Any, default: Any) -> bool:
    """``value`` equals ``default`` with the same types all the way down (``1 == 1.0 ==
    True`` in Python, not here)."""
    if type(value) is not type(default):
        return False
    if isinstance(value, tuple | list):
        return len(value) == len(default) and all(map(_same, value, default))
    if isinstance(value, dict):
        return value.keys() == default.keys() and all(_same(value[k], default[k]) for k in value)
    return bool(value == default)


def fresh(default: Any) -> Any:
    """A default as a model's factory gives it: a dict of its own, not the table's."""
    return dict(default) if isinstance(default, dict) else default

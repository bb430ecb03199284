"""The emitted plain checks (``eventlog.fast_input``) against pydantic's path, which decides.

For generated input events (valid, near-valid and hostile, built from the core schemas pydantic
runs), whenever the plain checks accept a batch, pydantic's path accepts it too and returns
the same bodies: the same keys in the same order, values of the same types, and new dicts and
lists exactly where pydantic makes new ones. The checks never accept what pydantic refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from eventlog import fast_input
from eventlog.errors import InvalidEventError
from eventlog.plain import input_bodies
from eventlog.prepare import checked_input, prepare_events
from eventlog.schema import INPUT_TYPES, SCHEMA, validation


class Text(str):
    """A str subclass: pydantic makes it a str, so the checks must leave it to pydantic."""


class Mapped(dict):  # type: ignore[type-arg]
    """A dict subclass (an input event the checks never take)."""


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.5, -2.0, float("inf"), float("nan"), 2**70]),
    st.text(max_size=4),
    st.builds(Text, st.text(max_size=3)),
    st.binary(max_size=3),
)
HOSTILE = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2)), inner, max_size=3),
    ),
    max_leaves=6,
)


def _sized(schema: Mapping[str, Any], fill: str) -> st.SearchStrategy[str]:
    low, high = schema.get("min_length", 0), schema.get("max_length")
    edges = [fill * n for n in {max(low - 1, 0), low, low + 1} if high is None or n <= high + 1]
    if high is not None:
        edges += [fill * high, fill * (high + 1)]
    return st.one_of(st.sampled_from(edges), st.text(max_size=6))


def plausible(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values near what ``schema`` accepts: on and around its bounds, of its types and of
    neighbouring ones (a bool for an int, an int for a float, a tuple for a list)."""
    kind = schema["type"]
    if kind == "default":
        return plausible(schema["schema"])
    if kind == "nullable":
        return st.one_of(st.none(), plausible(schema["schema"]))
    if kind == "str":
        return _sized(schema, "x")
    if kind in ("int", "float"):
        bounds = [schema[k] for k in ("ge", "gt", "le", "lt") if k in schema] or [0]
        near = [b + d for b in bounds for d in (-1, 0, 1)]
        values = st.sampled_from([*near, *(float(n) for n in near), True, False])
        return st.one_of(values, st.floats(allow_nan=True) if kind == "float" else st.integers())
    if kind == "bool":
        return st.sampled_from([True, False, 0, 1, "true", None])
    if kind == "literal":
        return st.sampled_from([*schema["expected"], "other", Text(schema["expected"][0])])
    if kind == "list":
        items = plausible(schema.get("items_schema", {"type": "any"}))
        lists = st.lists(items, max_size=max(schema.get("min_length", 0) + 1, 3))
        return st.one_of(lists, lists.map(tuple), st.just([]))
    if kind == "dict":
        values = plausible(schema.get("values_schema", {"type": "any"}))
        return st.one_of(
            st.dictionaries(st.text(max_size=4), values, max_size=3),
            st.dictionaries(st.integers(0, 3), values, max_size=2),
            st.builds(Mapped),
        )
    if kind == "union":
        return st.one_of(*(plausible(c) for c in schema["choices"]))
    if kind == "model":
        fields = schema["schema"]["fields"]
        return st.fixed_dictionaries(
            {}, optional={name: plausible(f["schema"]) for name, f in fields.items()}
        )
    if kind.startswith("function-") and "schema" in schema:
        return plausible(schema["schema"])
    if kind == "tuple":
        return st.tuples(*(plausible(s) for s in schema["items_schema"]))
    return HOSTILE


def valid(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values ``schema`` accepts as they are (where the generator can tell: else plausible)."""
    kind = schema["type"]
    if kind in ("default", "nullable") or kind.startswith("function-"):
        inner = valid(schema["schema"])
        return st.one_of(st.none(), inner) if kind == "nullable" else inner
    if kind == "str":
        low = schema.get("min_length", 0)
        return st.text(min_size=low, max_size=min(schema.get("max_length", low + 8), low + 8))
    if kind == "int":
        low = schema.get("ge", schema.get("gt", -1) + 1 if "gt" in schema else -5)
        return st.integers(low, low + 5)
    if kind == "float":
        return st.floats(0.5, 100.0)
    if kind == "bool":
        return st.booleans()
    if kind == "literal":
        return st.sampled_from(schema["expected"])
    if kind == "list":
        low = schema.get("min_length", 0)
        items = valid(schema.get("items_schema", {"type": "any"}))
        return st.lists(items, min_size=low, max_size=low + 2)
    if kind == "dict":
        values = valid(schema.get("values_schema", {"type": "any"}))
        return st.dictionaries(st.text(max_size=4), values, max_size=3)
    if kind == "any":
        return HOSTILE
    return plausible(schema)


def _fields(kind: str) -> dict[str, Any]:
    model = INPUT_TYPES[kind]
    model.model_rebuild()
    return dict(model.__pydantic_core_schema__["schema"]["fields"])


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    """An input event of a catalog type: each field given a plausible or a hostile value, or
    left out; now and then an unknown field, or a ``type`` no check names."""
    kind = draw(st.sampled_from(sorted(INPUT_TYPES)))
    event: dict[str, Any] = {}
    for name, field in _fields(kind).items():
        if name == "type":
            continue
        required = field["schema"]["type"] != "default"
        given = draw(st.sampled_from(["valid"] * 12 + ["plausible", "hostile", "absent"]))
        if given == "absent" or (given == "valid" and not required and draw(st.booleans())):
            continue
        strategy = {"valid": valid, "plausible": plausible}.get(given, lambda _: HOSTILE)
        event[name] = draw(strategy(field["schema"]))
    event["type"] = draw(st.sampled_from([kind] * 20 + ["nope", Text(kind), None]))
    if draw(st.integers(0, 19)) == 0:
        event[draw(st.sampled_from(["extra", "redacted", 3]))] = draw(SCALARS)
    return event


def strict(value: Any) -> Any:
    """``value`` with the type of every part spelt out (``1 == True`` and ``1 == 1.0`` in
    Python, not in a stored record)."""
    if isinstance(value, dict):
        return ("dict", [(strict(k), strict(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [strict(v) for v in value])
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


def full(items: list[Any]) -> list[dict[str, Any]] | None:
    """pydantic's bodies of ``items`` (None: refused)."""
    try:
        return validation.input_bodies(items)
    except ValidationError:
        return None


def same(fast: list[dict[str, Any]], slow: list[dict[str, Any]], items: list[Any]) -> None:
    assert [strict(b) for b in fast] == [strict(b) for b in slow]
    for body, other, item in zip(fast, slow, items, strict=True):
        for key, value in body.items():  # kept where pydantic keeps, new where it makes new
            if key in item:
                assert (value is item[key]) == (other[key] is item[key]), key


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(events(), min_size=1, max_size=3))
def test_the_plain_checks_accept_only_what_pydantic_accepts_and_return_its_bodies(
    items: list[dict[str, Any]],
) -> None:
    fast = input_bodies(items)
    slow = full(items)
    if fast is not None:
        assert slow is not None, f"the checks accepted what pydantic refuses: {items!r}"
        same(fast, slow, items)
    for item in items:  # one by one, as ``append`` checks each line
        one = input_bodies([item])
        if one is not None:
            expected = full([item])
            assert expected is not None, f"the checks accepted what pydantic refuses: {item!r}"
            same(one, expected, [item])


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid-looking event of any catalog type: every required field given a valid value,
    each optional one given or left out."""
    kind = draw(st.sampled_from(sorted(INPUT_TYPES)))
    event: dict[str, Any] = {"type": kind}
    for name, field in _fields(kind).items():
        if name != "type" and (field["schema"]["type"] != "default" or draw(st.booleans())):
            event[name] = draw(valid(field["schema"]))
    return event


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(valid_events())
def test_an_event_given_as_a_dict_or_as_its_model_is_stored_as_the_same_body(
    item: dict[str, Any],
) -> None:
    """The CLI, HTTP and MCP give events as dicts, the Python API often as models: both store
    one body, a default left out (a learning's ``evidence``) filled alike."""
    slow = full([item])
    if slow is None:
        return
    (model,) = validation.input_adapter().validate_python([item])
    assert [strict(b) for b in validation.event_bodies([model])] == [strict(b) for b in slow]


def _accepts(kind: str, event: dict[str, Any]) -> bool:
    return input_bodies([{"type": kind, **event}]) is not None


def test_the_checks_take_the_everyday_events_and_leave_the_rest_to_pydantic() -> None:
    """Each message type's plain events, the framework state types and the memory types are
    checked in plain Python; a value pydantic would coerce, a field with a validator (``ts``),
    a nested model (``origin``) or a type whose fields hold one (``compaction``) is not."""
    assert _accepts("user", {"content": "hi", "id": "e1", "meta": {"k": [1]}})
    assert _accepts("action", {"tool": "grep", "params": {"q": "x"}})
    assert _accepts("observation", {"result": {"a": 1}, "action_id": None, "is_error": True})
    assert _accepts("store_put", {"namespace": ["a"], "key": "k", "value": {}, "ttl": 1.5})
    assert not _accepts("user", {"content": Text("hi")})
    assert not _accepts("observation", {"result": 1, "is_error": 1})  # pydantic: True
    assert not _accepts("store_put", {"namespace": ["a"], "key": "k", "value": {}, "ttl": 2})
    assert not _accepts("user", {"content": "hi", "ts": "2026-01-01T00:00:00Z"})
    assert not _accepts("user", {"content": "hi", "origin": {}})
    assert set(fast_input.CHECKS) >= set(SCHEMA.messages) | set(SCHEMA.state) - {"store_touched"}
    assert "compaction" not in fast_input.CHECKS and "store_touched" not in fast_input.CHECKS


ORIGIN = {"format": "f", "source": "s", "index": 0, "sha256": "0" * 64, "text": "{}"}


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"type": "session_ended", "status": "done"}, "type"),  # checked in plain Python
        ({"type": "user", "content": "x", "origin": ORIGIN}, "origin"),  # by pydantic
    ],
)
def test_the_refusals_of_system_types_and_importer_fields_stay(
    event: dict[str, Any], field: str
) -> None:
    for refuse in (lambda: prepare_events([event]), lambda: checked_input(event)):
        with pytest.raises(InvalidEventError) as refused:
            refuse()
        assert refused.value.field == field
    assert prepare_events([event], system=True) == full([event])


def test_the_emitted_constants_are_the_schemas() -> None:
    from eventlog import schema

    assert fast_input.SYSTEM_TYPES == schema.SYSTEM_TYPES
    assert fast_input.IMPORTER_FIELDS == schema.IMPORTER_FIELDS
    assert fast_input.SCHEMA_VERSION == schema.SCHEMA_VERSION


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(valid_events(), st.randoms(use_true_random=False), st.booleans())
def test_an_events_keys_in_any_order_give_pydantics_body(
    item: dict[str, Any], rng: Any, with_id: bool
) -> None:
    """The checks an event runs are chosen by its type and keys (``eventlog.plain._plan``, the
    envelope's fields only where given): the order a caller wrote them in changes nothing."""
    if with_id:
        item["id"] = "e1"
    keys = list(item)
    rng.shuffle(keys)
    shuffled = {key: item[key] for key in keys}
    fast, slow = input_bodies([shuffled]), full([shuffled])
    if fast is not None:
        assert slow is not None
        assert [list(b) for b in fast] == [list(b) for b in slow]  # the same keys' order
        same(fast, slow, [shuffled])


def test_the_remembered_plans_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_MAX_PLANS`` (type, keys) pairs the checks are chosen each time, not kept."""
    from eventlog import plain

    monkeypatch.setattr(plain, "_PLANS", {})
    monkeypatch.setattr(plain, "_MAX_PLANS", 2)
    orders = [{"type": "user", "content": "hi", "id": "e1", "meta": {}}]
    orders += [{"meta": {}, "id": "e1", "content": "hi", "type": "user"}]
    orders += [{"content": "hi", "type": "user", "meta": {}, "id": "e1"}]
    for event in orders:
        assert input_bodies([event]) == [{"type": "user", "id": "e1", "meta": {}, "content": "hi"}]
    assert len(plain._PLANS) == 2

"""Canonical JSON and record hashing.

Canonical JSON is UTF-8, keys sorted at every depth, no insignificant whitespace, floats in
shortest round-trip form (orjson's encoder). A record's ``hash`` is the SHA-256 (hex) of the
canonical JSON of the record without its ``hash`` key; ``prev`` is included, which chains a
session's records.

A stored line is the canonical JSON of the record body with ``"hash"`` appended as the last key,
then ``\\n``. The line is therefore a pure function of the body: ``verify`` recomputes it and
compares bytes, so any change to a stored byte is detected, even one that parses to the same value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, ParamSpec

import orjson

from eventlog.errors import InvalidEventError, NotCanonicalizableError
from eventlog.exact_json import MAX_DEPTH, depth_error, first_too_deep, scan_list
from eventlog.native import lines

_OPTIONS = orjson.OPT_SORT_KEYS
_P = ParamSpec("_P")
_Encoded = tuple[list[dict[str, Any]], bytes, list[str]]  # records, their lines, hashes


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON encoding of ``value``."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise NotCanonicalizableError(str(exc)) from exc


def hash_bytes(canonical: bytes) -> str:
    """The SHA-256 (hex) of canonical bytes."""
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    return hashlib.sha256(canonical).hexdigest()


def encode_record(body: dict[str, Any]) -> tuple[bytes, str]:
    """Encode a record body (no ``hash`` key) to its stored line; return (line, hash).

    What ``verify`` checks each stored line against; ``encode_batch`` runs the same steps for
    the append path, and a property test holds the two equal."""
    try:
        canonical = orjson.dumps(body, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise NotCanonicalizableError(str(exc)) from exc
    if canonical == b"{}":
        raise NotCanonicalizableError("a record cannot be empty")
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    digest = hashlib.sha256(canonical).hexdigest()
    return b'%s,"hash":"%s"}\n' % (canonical[:-1], digest.encode("ascii")), digest


def batch_json(bodies: list[dict[str, Any]], max_depth: int | None = None) -> bytes:
    """The bodies of a batch as one JSON array (not canonical: what a scan of their contents,
    such as the secret gate, reads), after refusing what canonical JSON cannot hold, naming
    the body and field: values JSON has no form for, NaN and infinities, which the encoder
    would write as ``null`` (so finding no ``null`` in the batch rules them out), and, given
    ``max_depth``, nesting deeper than that (``refuse_deep``). One scan of the JSON
    (``scan_list``) answers both; only a batch with a ``null`` or too deep is then looked at
    body by body. Checking here, on the bodies alone, spares ``encode_batch``."""
    try:
        data = orjson.dumps(bodies)
    except (orjson.JSONEncodeError, TypeError) as batch_error:
        if max_depth is not None:  # deeper than the encoder goes: say that, not its error
            refuse_deep(bodies, limit=max_depth)
        for index, body in enumerate(bodies):  # name the body
            try:
                orjson.dumps(body)
            except (orjson.JSONEncodeError, TypeError) as exc:
                raise NotCanonicalizableError(str(exc), index=index) from exc
        raise NotCanonicalizableError(str(batch_error)) from batch_error
    null, deep = scan_list(data, len(bodies), max_depth)
    if deep and max_depth is not None:  # first: a body too deep is named as such
        refuse_deep(bodies, data, max_depth)
    if null:
        for index, body in enumerate(bodies):
            if b"null" in orjson.dumps(body):
                try:  # the standard library's C encoder refuses them; find the field in Python
                    json.dumps(body, allow_nan=False)
                except (ValueError, TypeError):
                    _refuse_non_finite(body, index)
    return data


def refuse_deep(
    bodies: list[dict[str, Any]], data: bytes | None = None, limit: int = MAX_DEPTH
) -> None:
    """Refuse a body nested deeper than ``limit`` (``InvalidEventError`` naming its index and
    top field; ``data``: the bodies' JSON as a list, when already encoded)."""
    found = first_too_deep(bodies, data, limit)
    if found is not None:
        index, key = found
        raise InvalidEventError(depth_error("", limit), index=index, field=key or None)


def encode_batch_py(
    bodies: list[dict[str, Any]],
    version: int,
    session: str,
    seq: int,
    ts: str,
    ids: list[str],
    prev: str | None,
) -> tuple[list[dict[str, Any]], bytes, list[str]]:
    """Encode a batch's bodies (that passed ``batch_json``) as consecutive stored lines.

    Each record is the envelope (``v``, ``id``, ``session``, ``seq`` from ``seq + 1`` on,
    ``ts``, and ``batch: [i, n]`` when there is more than one), then the body, whose ``id`` and
    ``ts``, when given, win, then ``prev``: the hash of the record before it (the first gets
    ``prev``). Returns the records (without ``hash``), the lines joined, and each one's hash.

    ``encode_record``'s steps for a whole batch, in Python: the reference the extension's
    ``encode_batch`` must match byte for byte (``encode_batch`` below runs whichever is built).
    """
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    dumps, sha256, option = orjson.dumps, hashlib.sha256, _OPTIONS
    count = len(bodies)
    records: list[dict[str, Any]] = []
    pieces: list[bytes] = []  # four per line, joined once
    hashes: list[str] = []
    try:
        for i, (id_, body) in enumerate(zip(ids, bodies, strict=True), 1):
            record = {"v": version, "id": id_, "session": session, "seq": seq + i, "ts": ts}
            if count > 1:
                record["batch"] = [i, count]
            record.update(body)
            record["prev"] = prev
            records.append(record)
            canonical = dumps(record, option=option)
            prev = sha256(canonical).hexdigest()
            hashes.append(prev)
            pieces += (canonical[:-1], b',"hash":"', prev.encode(), b'"}\n')
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise NotCanonicalizableError(str(exc), index=len(hashes)) from exc
    return records, b"".join(pieces), hashes


def _natively(
    python: Callable[_P, _Encoded], native: Callable[..., _Encoded]
) -> Callable[_P, _Encoded]:
    """``python``'s steps, run by the extension's ``native`` (given the same arguments, then
    ``dumps`` and its option); a batch it cannot encode is encoded by ``python``, whose error
    names the record."""

    def encode(*args: _P.args, **kwargs: _P.kwargs) -> _Encoded:
        try:
            return native(*args, orjson.dumps, _OPTIONS, **kwargs)
        except (orjson.JSONEncodeError, TypeError):
            return python(*args, **kwargs)

    return encode


# Every append's inner loop: the extension's when it is built, else the Python steps.
encode_batch = encode_batch_py if lines is None else _natively(encode_batch_py, lines.encode_batch)


def _refuse_non_finite(value: Any, index: int, path: str = "") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NotCanonicalizableError(
            "NaN and infinite numbers are not JSON", index=index, field=path or None
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_non_finite(item, index, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, index, f"{path}.{i}" if path else str(i))


def expected_line(record: dict[str, Any]) -> tuple[bytes, str]:
    """The stored line a parsed record must have, and the hash its body gives."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return encode_record(body)

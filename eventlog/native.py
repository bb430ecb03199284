"""The optional C extension ``eventlog._lines``: the append path's inner loop (envelope,
canonical JSON, SHA-256 chain) without the interpreter's per-record work, the one scan of each
batch's JSON for its nesting and nulls (``exact_json.json_shape``), and ``batch``'s group
commit on a thread that never takes the interpreter lock.

``lines`` is the extension, or None when it is not built (no compiler or OpenSSL headers at
install) or ``AIRSSPEC_PURE_PYTHON=1`` is set; then the pure-Python steps run, which write
the same bytes and keep the same promises (tests hold the two equal), only slower.

``AIRSSPEC_REQUIRE_NATIVE=1`` turns a missing extension into an error at import (CI sets it,
so a build that silently fell back to Python fails instead of passing slower). It checks the
build only: with ``AIRSSPEC_PURE_PYTHON=1`` as well, the Python steps still run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from eventlog.errors import NativeExtensionMissingError


class SyncThread(Protocol):
    """A group commit (``group_commit.PyGroupCommit`` or the extension's ``GroupCommit``):
    what the log calls on it."""

    @property
    def failed(self) -> bool: ...
    def mark(self, fd: int, first: int, /) -> None: ...
    def run_once(self) -> None: ...
    def forget(self, fd: int, /) -> None: ...
    def collect(self) -> list[tuple[int, int, int]]: ...
    def close(self) -> None: ...


class Extension(Protocol):
    """What the extension module defines (its C source declares it; a type checker cannot
    read the built module, so its shape is written here)."""

    GroupCommit: Callable[[float], SyncThread]

    # encode_batch(bodies, version, session, seq, ts, ids, prev, dumps, option): what
    # canonical.encode_batch_py returns for the first seven (its C source documents it)
    encode_batch: Callable[..., tuple[list[dict[str, Any]], bytes, list[str]]]

    def json_shape(self, data: bytes, /) -> tuple[int, bool]: ...
    def _fail_allocations(self, count: int, /) -> None: ...


lines: Extension | None = None
_built: Extension | None = None
_why: ImportError | None = None
if (
    os.environ.get("AIRSSPEC_PURE_PYTHON") != "1"
    or os.environ.get("AIRSSPEC_REQUIRE_NATIVE") == "1"
):
    try:
        from eventlog import _lines
    except ImportError as exc:
        _why = exc
    else:
        _built = _lines
if _built is None and os.environ.get("AIRSSPEC_REQUIRE_NATIVE") == "1":
    raise NativeExtensionMissingError(
        "AIRSSPEC_REQUIRE_NATIVE=1 but the C extension eventlog._lines cannot be imported "
        f"({_why}); build it with `pip install -e .` (needs a C compiler and OpenSSL headers)"
    ) from _why
if os.environ.get("AIRSSPEC_PURE_PYTHON") != "1":
    lines = _built

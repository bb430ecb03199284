"""Identities: the names of users, agents and projects, as values that are never paths.

One rule, checked once where a name enters (a command-line flag, the environment, a request
header, the token file, ``airsspec.toml``, a record appended to the log) and again where the log
is read back into an owner (``projections.scopes``):

- 1 to 128 characters, in Unicode's NFC form and lower case (``value == value.lower()``): the
  name is kept exactly as given, never normalised or folded behind the caller's back; two
  spellings of one name cannot both exist (``José`` in two normal forms, ``Ana`` and ``ana``),
  and none collides with another on a case-insensitive filesystem, but through the few
  lower-case letters whose case folding is another lower-case letter (the long s, U+017F,
  and ``s``; the final sigma, U+03C2, and the sigma; the micro sign and the mu; on NTFS the
  dotless i, U+0131, and ``i``): refusing them would refuse ordinary Greek and Turkish names,
  so a workspace on such a filesystem should not hold both names;
- letters and digits of any script (with their combining marks), and ``.``, ``_``, ``-``, ``@``
  between them: no separator, space, control, format (bidi) or private-use character;
- it starts with a letter or a digit and does not end with ``.``, and it is not a name Windows
  reserves (``con``, ``nul``, ``com1``...): the name is portable as a folder name, though no
  folder is ever named by joining it unchecked (``name_folder``).

A value breaking the rule is refused with ``InvalidNameError`` (one line naming the field and
what to use); nothing is stored.

Where a name does become a folder (``sources/users/NAME/``), ``name_folder`` derives the path
from the checked value inside its parent and refuses a parent or a folder that is a link.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path

from eventlog.errors import InvalidNameError, UnsafePathError

MAX_NAME = 128
SHARED = "*"
"""A recorded owner value shared on purpose with every reader (an admin's to record; never a
reader's own name: the rule refuses it)."""

_PUNCTUATION = frozenset("._-@")
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
)
RULE = (
    "1-128 lower-case letters or digits (any script, NFC) with '.', '_', '@' or '-' between "
    "them, starting with a letter or digit"
)


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a valid name (None: it is one)."""
    if not isinstance(value, str):
        return f"a name is text, not {type(value).__name__}"
    if not 1 <= len(value) <= MAX_NAME:
        return f"{len(value)} characters (at most {MAX_NAME}, at least 1)"
    if unicodedata.normalize("NFC", value) != value:
        return "not in Unicode NFC form"
    if value.lower() != value:
        return f"not lower case (use {value.lower()!r})"
    for char in value:
        if char in _PUNCTUATION:
            continue
        category = unicodedata.category(char)
        if category[0] not in "LNM":
            return f"character {char!r} (U+{ord(char):04X}) is not allowed"
    if unicodedata.category(value[0])[0] not in "LN":
        return "it must start with a letter or digit"
    if value.endswith("."):
        return "it must not end with '.'"
    if value.split(".")[0] in _RESERVED:
        return f"{value.split('.')[0]!r} is a reserved device name"
    return None


def check_name(value: object, field: str = "user") -> str:
    """``value`` if it is a valid name (see the module); else ``InvalidNameError`` naming
    ``field`` (where the value came from: ``--user``, ``AIRSSPEC_USER``, a header)."""
    problem = name_problem(value)
    if problem is not None:
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:60])
        raise InvalidNameError(f"{field}: invalid name {shown}: {problem}; use {RULE}")
    return value  # type: ignore[return-value]  # a str: name_problem checked it


def check_scope_value(value: object, field: str) -> str:
    """A recorded scope value: a valid name, or ``SHARED`` (``*``)."""
    return SHARED if value == SHARED else check_name(value, field)


def name_folder(parent: Path, name: str, field: str = "user") -> Path:
    """``parent / name`` for a valid ``name``, refused (``UnsafePathError``) when ``parent`` or
    the folder itself is a link: a removal or a write there stays inside ``parent``."""
    check_name(name, field)
    for path in (parent, parent / name):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise UnsafePathError(path)
    return parent / name

"""The envelopes every event type shares: ``Event`` (what a caller appends) and ``Record``
(what the log stores), the values they carry (``Origin``, ``Redaction``), and ``UnknownRecord``.
Kept apart from ``models`` so the emitted ``records`` can build on them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eventlog.ids import normalize_ts
from eventlog.schema.catalog import OMIT_NONE

Meta = dict[str, Any]


class Frozen(BaseModel):
    """A value read, never changed, that refuses a key it does not declare (a misspelt key is
    an error, never ignored): settings sections, seals, tool inputs."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Origin(BaseModel):
    """Where an imported record came from, with its exact source bytes (UTF-8), so the source
    can be re-exported byte for byte: ``prefix`` are the bytes between the previous record and
    this one (JSON arrays), ``suffix`` the bytes after the last record of an import."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    format: str
    source: str
    index: int = Field(ge=0)
    sha256: str
    text: str
    prefix: str = ""
    suffix: str | None = None


class Redaction(BaseModel):
    """One secret replaced at append: where (dotted path), what kind, and its SHA-256 prefix."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    kind: str
    sha256: str


class Event(BaseModel):
    """Base of what callers append. ``id`` and ``ts`` are assigned unless given."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: str
    id: Annotated[str | None, OMIT_NONE] = Field(default=None, min_length=1, max_length=200)
    ts: Annotated[str | None, OMIT_NONE] = None
    meta: Annotated[Meta | None, OMIT_NONE] = None
    origin: Annotated[Origin | None, OMIT_NONE] = None

    @field_validator("ts")
    @classmethod
    def _utc_rfc3339(cls, value: str | None) -> str | None:
        return None if value is None else normalize_ts(value)


IMPORTER_FIELDS = frozenset({"origin"})
"""Fields of an input event only importers (and airsspec's own writers) set: ``append``
refuses them, so a hand-written ``origin`` can never pass for an imported record."""


class Record(BaseModel):
    """Envelope shared by every stored record."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)

    v: int
    id: str
    session: str
    seq: int = Field(ge=1)
    ts: str
    type: str
    prev: str | None
    hash: str
    meta: Meta | None = None
    origin: Origin | None = None
    batch: tuple[int, int] | None = None
    redacted: tuple[Redaction, ...] | None = None


class UnknownRecord(Record):
    """A record whose ``type`` this version does not know; every field is kept."""

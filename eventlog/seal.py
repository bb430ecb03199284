"""Seals: an exportable, optionally signed statement of every session's head at one moment.

A head file lives beside its log, so someone able to rewrite a log can rewrite its head too. A
seal is taken (``make_seal``) and kept elsewhere; later, ``verify --against SEAL`` checks that
each sealed session still holds the sealed record (seq and hash). The hash chain then proves that
every record up to it is unchanged, so a cut, an emptied or deleted log, or a re-chained forgery
made after the seal is caught by anyone holding it.

With a key the seal is signed (HMAC-SHA256 over its canonical JSON), so a seal cannot be forged
or edited by someone without the key; ``key_id`` names the key by a hash prefix. A seal without a
key is still useful when it is stored where the log's writer cannot reach it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Literal

from pydantic import Field, ValidationError

from eventlog.canonical import canonical_json
from eventlog.errors import SealError, field_of
from eventlog.ids import utc_now
from eventlog.log import Log
from eventlog.schema import Frozen
from eventlog.verify import Anchor

SEAL_FORMAT: Literal["airsspec-seal/1"] = "airsspec-seal/1"


class SealedHead(Frozen):
    """One session's last record when the seal was taken."""

    seq: int = Field(ge=0)
    hash: str | None


class Signature(Frozen):
    """An HMAC-SHA256 of the seal's canonical JSON without its signature."""

    alg: Literal["hmac-sha256"] = "hmac-sha256"
    key_id: str
    value: str


class Seal(Frozen):
    """The heads of every session at ``sealed_at``."""

    format: Literal["airsspec-seal/1"] = SEAL_FORMAT
    sealed_at: str
    sessions: dict[str, SealedHead]
    signature: Signature | None = None

    def anchors(self) -> dict[str, Anchor]:
        """What ``verify`` must find: each session's sealed record."""
        return {
            name: Anchor(head.seq, head.hash, f"the seal of {self.sealed_at}")
            for name, head in self.sessions.items()
        }


def _key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def _mac(seal: Seal, key: bytes) -> str:
    body = canonical_json(seal.model_dump(exclude={"signature"}))
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def make_seal(log: Log, key: bytes | None = None, only: Iterable[str] | None = None) -> Seal:
    """Seal the current head of every session of ``log``, or of those in ``only`` (signed
    when ``key`` is given)."""
    sessions = {}
    for name in log.sessions() if only is None else sorted(only):
        tail = log.head(name)
        sessions[name] = SealedHead(seq=tail.seq, hash=tail.hash)
    seal = Seal(sealed_at=utc_now(), sessions=sessions)
    if key is None:
        return seal
    return seal.model_copy(
        update={"signature": Signature(key_id=_key_id(key), value=_mac(seal, key))}
    )


def load_seal(data: bytes, key: bytes | None = None) -> tuple[Seal, list[str]]:
    """Parse a seal and check its signature with ``key``; return it with warnings.

    Raises ``SealError`` for an unreadable seal, a wrong signature, or a key given for a seal
    that is not signed.
    """
    try:
        seal = Seal.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise SealError(
            f"not an {SEAL_FORMAT} seal: field '{field_of(err, 'seal')}': {err['msg']}"
        ) from exc
    warnings = []
    if key is not None:
        if seal.signature is None:
            raise SealError("the seal is not signed, but a key was given")
        if seal.signature.key_id != _key_id(key):
            raise SealError(
                f"the seal was signed with key {seal.signature.key_id}, not with the key given "
                f"({_key_id(key)})"
            )
        if not hmac.compare_digest(seal.signature.value, _mac(seal, key)):
            raise SealError("the seal's signature is wrong: the seal was edited")
    elif seal.signature is not None:
        warnings.append("the seal is signed but no --key was given: its signature was not checked")
    return seal, warnings

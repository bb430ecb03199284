"""Secret redaction at append: a secret given to the log is replaced before anything is written.

Detection uses the regex detectors of ``detect-secrets`` that recognise a credential by its shape
(AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, PyPI, npm, SendGrid, private-key headers, URLs
with a password, ...), plus shapes it lacks (Anthropic API keys, OpenAI project keys, GitHub
fine-grained tokens, whole JWTs with their signature, whole PEM private-key blocks, AWS secret
access keys on their own) and any patterns the workspace configures. Keyword and generic entropy
detectors are not used: they flag ordinary words and hashes, and a redaction changes what is
stored.

An AWS secret access key has no prefix: it is 40 characters of base64 (``A-Z a-z 0-9 / +``).
It is recognised as exactly such a run (not part of a longer one, not followed by ``=``
padding) that mixes upper case, lower case and digits, holds at most three ``/``, and whose
characters have a Shannon entropy of at least 4.4 bits: a git SHA-1 (hex, one case), a path or
URL (several ``/``) and an identifier in CamelCase (repeated letters: 4.2-4.35 bits) fall short.
Measured: 99.3% of 200,000 random keys are found; of the 40-character runs in 8,237 text files
of installed Python packages, none is taken for a key.

The whole match of every detector is replaced (never only a group: a group can be a prefix,
and then the secret's body would be stored), by ``[REDACTED:<kind>:<sha256 prefix>]``; the
prefix is of the whole secret, so two mentions of one secret can be matched without keeping it,
and two different secrets of one kind differ. The record lists what was redacted in
``redacted``: the dotted path of each value, the kind and the prefix. A record is never partly
redacted silently: ``redacted`` is part of the hashed record.

The same detectors refuse a new session id shaped like a secret (``refuse_secret_id``: an id is
stored in every record and names files) and redact source documents before the cold tier
indexes them (``redact_document``).

Speed: a record is scanned only when its JSON holds a run of 20 or more token characters (every
detected shape has one; ``/`` and ``+`` count, as base64 keys hold them) or a literal that a
shape needs (``PRIVATE KEY``, ``://``...); that gate is two C-speed passes, so prose costs about
a microsecond.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from eventlog.errors import InvalidSessionIdError

if TYPE_CHECKING:
    from eventlog.schema import Redaction

# Detectors whose shape is too loose to redact on (they flag IPs, words, ordinary ids).
_LOOSE = frozenset(
    {
        "IPPublicDetector",
        "ArtifactoryDetector",
        "CloudantDetector",
        "IbmCloudIamDetector",
        "IbmCosHmacDetector",
        "SoftlayerDetector",
    }
)
_OWN = {
    "anthropic-api-key": r"sk-ant-[a-z]+\d*-[A-Za-z0-9_\-]{20,}",
    "openai-api-key": r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}",
    "github-token": r"github_pat_[A-Za-z0-9_]{22,}",
    # greedy to the end of the signature (the library's pattern stops before it)
    "json-web-token": r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_+/=-]*)?",
    "aws-secret-access-key": r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
    "private-key-block": r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)",
}
_GATE_LITERALS = (b"://", b"PRIVATE KEY", b"AccountKey=", b"_authToken")
_GATE_PATTERN = re.compile(b"|".join(map(re.escape, _GATE_LITERALS)))
# On a batch, each literal is searched only when a byte of it that prose seldom holds is present:
# a one-byte search is a memchr, many times faster than a substring search over the same bytes.
_GATE_FINDS = tuple(
    (next(bytes([b]) for b in b"/=YT" if b in literal), literal) for literal in _GATE_LITERALS
)
_GATE_SEARCH_BELOW = 4096  # bytes: one regex pass wins on a record, plain finds on a batch
_TOKEN_RUN = 20
_TOKEN_TABLE = bytes(
    ord("a") if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_-/+") else ord(" ")
    for c in range(256)
)
_RUN = b"a" * _TOKEN_RUN


_AWS_SECRET_MIN_ENTROPY = 4.4  # bits per character; see the module


def _entropy(text: str) -> float:
    counts = Counter(text).values()
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts)


def _aws_secret(text: str) -> bool:
    """Whether a 40-character base64 run is random enough to be an AWS secret access key."""
    return (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
        and text.count("/") <= 3
        and _entropy(text) >= _AWS_SECRET_MIN_ENTROPY
    )


_CHECKS: dict[str, Callable[[str], bool]] = {"aws-secret-access-key": _aws_secret}
"""Own shapes whose match must also pass a check to count as a secret."""


@dataclass(frozen=True, slots=True)
class Detector:
    """One secret shape: its kind (a slug), its pattern (the whole match is the secret), and
    for a shape with no prefix, a check the match must pass."""

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def library_detectors() -> list[Detector]:
    """The shape detectors of ``detect-secrets`` (all but the loose ones)."""
    import detect_secrets.plugins as plugins
    from detect_secrets.plugins.base import RegexBasedDetector

    found = []
    for info in pkgutil.iter_modules(plugins.__path__):
        module = importlib.import_module(f"{plugins.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, RegexBasedDetector)
                and cls is not RegexBasedDetector
                and cls.__module__ == module.__name__
                and name not in _LOOSE
            ):
                plugin = cls()  # an instance: ``secret_type`` is a property of the base class
                found += [Detector(_slug(plugin.secret_type), p) for p in plugin.denylist]
    return sorted(found, key=lambda d: d.kind)


class Redactor:
    """Finds and replaces secrets in event bodies."""

    def __init__(self, extra: Mapping[str, str] | None = None) -> None:
        own = [Detector(kind, re.compile(p), _CHECKS.get(kind)) for kind, p in _OWN.items()]
        custom = [Detector(kind, re.compile(p)) for kind, p in (extra or {}).items()]
        # Own and custom shapes first: a whole PEM block wins over the library's header match.
        self._first = [*own, *custom]
        self._custom = bool(custom)
        self._all: list[Detector] | None = None

    @property
    def detectors(self) -> list[Detector]:
        """Every shape, in the order they are tried; the library's are loaded on first use
        (importing it takes a fifth of a second, which an append of prose never pays)."""
        if self._all is None:
            self._all = [*self._first, *library_detectors()]
        return self._all

    def _gated(self, data: bytes) -> bool:
        if self._custom:
            return True  # a custom shape can be anything: always scan
        if _RUN in data.translate(_TOKEN_TABLE):
            return True
        if len(data) < _GATE_SEARCH_BELOW:
            return _GATE_PATTERN.search(data) is not None
        return any(byte in data and literal in data for byte, literal in _GATE_FINDS)

    def redact_all(self, bodies: list[dict[str, Any]], data: bytes) -> None:
        """Redact every body of a batch in place, setting ``redacted`` on those that had a
        secret. The gate runs once over ``data``, the batch's JSON (``batch_json``), first."""
        if not self._gated(data):
            return
        for body in bodies:
            found = self.redact(body)
            if found:
                body["redacted"] = [r.model_dump() for r in found]

    def redact(self, body: dict[str, Any]) -> list[Redaction]:
        """Replace every secret in the string values (and keys) of ``body``, in place."""
        try:
            data = orjson.dumps(body)
        except (orjson.JSONEncodeError, TypeError):
            data = b"://"  # not JSON (refused when encoded); scan what can be scanned
        if not self._gated(data):
            return []
        found: list[Redaction] = []
        for key in list(body):
            body[key] = self._value(body[key], key, found)
        return found

    def _value(self, value: Any, path: str, found: list[Redaction]) -> Any:
        if isinstance(value, str):
            return self.redact_text(value, path, found)
        if isinstance(value, dict):
            return {
                self.redact_text(k, f"{path}.<key>", found): self._value(v, f"{path}.{k}", found)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._value(v, f"{path}.{i}", found) for i, v in enumerate(value)]
        return value

    def redact_text(self, text: str, path: str, found: list[Redaction]) -> str:
        """``text`` with every secret replaced by its marker (each recorded in ``found``)."""
        if len(text) < 8 or not self._gated(text.encode("utf-8", "surrogatepass")):
            return text
        spans = self._spans(text)
        if not spans:
            return text
        import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

        from eventlog.schema import Redaction  # a model only once a secret is found

        out, last = [], 0
        for start, end, kind in sorted(spans):
            secret = text[start:end]
            digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            found.append(Redaction(path=path, kind=kind, sha256=digest))
            out += [text[last:start], f"[REDACTED:{kind}:{digest}]"]
            last = end
        out.append(text[last:])
        return "".join(out)

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        """Where the secrets of ``text`` are: the whole match of each detector (the first
        detector to claim a stretch of text names it)."""
        spans: list[tuple[int, int, str]] = []
        for detector in self.detectors:
            for match in detector.pattern.finditer(text):
                start, end = match.span()
                if end <= start or any(s < end and start < e for s, e, _ in spans):
                    continue
                if detector.check is None or detector.check(match.group()):
                    spans.append((start, end, detector.kind))
        return spans

    def kinds_in(self, text: str) -> list[str]:
        """The kinds of secret ``text`` holds (empty when none)."""
        if not self._gated(text.encode("utf-8", "surrogatepass")):
            return []
        return [kind for _, _, kind in sorted(self._spans(text))]

    def refuse_secret_id(self, session: str) -> None:
        """Refuse a session id that holds a secret (``InvalidSessionIdError``, not naming it)."""
        kinds = self.kinds_in(session)
        if kinds:
            raise InvalidSessionIdError(
                f"invalid session id: it looks like a secret ({kinds[0]}); a session id is "
                "stored in every record and in file names, so choose another"
            )


_DOCUMENTS: Redactor | None = None


def redact_document(text: str) -> str:
    """``text`` (a source document) with every secret of the built-in shapes replaced by its
    marker: what the cold tier indexes, embeds and returns."""
    global _DOCUMENTS
    if _DOCUMENTS is None:
        _DOCUMENTS = Redactor()
    return _DOCUMENTS.redact_text(text, "document", [])

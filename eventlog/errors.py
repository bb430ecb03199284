"""Every error airsspec raises on purpose, in one place, by what the caller can do about it.

One root, ``AirsspecError``, here in the lowest layer so every package can import it. Below it,
one class per category (bad input, not found, forbidden, conflict, integrity, write failed,
configuration, unavailable); each concrete error subclasses its category (and, where a caller
already catches one, the built-in it stands for: ``ValueError``, ``OSError``...). A category
declares what the front ends do with its errors, so no front end spells a list of classes:

- ``exit_code``: the command line's exit status (1 the log, a check or the machine failed, or
  the work is busy; 2 the caller's input or setup is wrong and nothing was written);
- ``http_status``: the HTTP API's answer (400, 403, 404, 409, 413, 500);
- ``report()``: the lines the command line prints on stderr.

``EventLogError`` and ``CompactorError`` name the package an error comes from; they carry no
category of their own. Third-party exceptions are wrapped where they are caught
(``raise ... from exc``), never listed here. ``field_of`` and ``validation_problem`` name the
field of a pydantic validation error, the one spelling every front end uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# ---- the root and the package markers ---------------------------------------------------------


class AirsspecError(Exception):
    """Root of every error airsspec raises on purpose: catch this one to catch them all."""

    exit_code: int = EXIT_USAGE
    http_status: int = 400

    def __init_subclass__(
        cls, *, exit_code: int | None = None, http_status: int | None = None, **kwargs: Any
    ) -> None:
        """A category names its answers in its header: ``class X(AirsspecError, exit_code=...,
        http_status=...)``; a subclass inherits them, or overrides one as a class attribute."""
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code
        if http_status is not None:
            cls.http_status = http_status

    def report(self) -> list[str]:
        """The lines the command line prints on stderr for this error."""
        return [f"airsspec: error: {self}"]


class EventLogError(AirsspecError):
    """Raised by the event log (its category says what to do about it)."""


class CompactorError(AirsspecError):
    """Raised by the compactor or the learnings extractor (its category says what to do)."""


# ---- categories --------------------------------------------------------------------------------


class BadInputError(AirsspecError, exit_code=EXIT_USAGE, http_status=400):
    """The input or the command is wrong: fix it and ask again; nothing was written."""


class NotFoundError(AirsspecError, exit_code=EXIT_USAGE, http_status=404):
    """What was named does not exist (a session, a workspace)."""


class ForbiddenError(AirsspecError, exit_code=EXIT_USAGE, http_status=403):
    """The caller may not do this (scope, token, a file reached through a link): asking again
    will not help."""


class ConflictError(AirsspecError, exit_code=EXIT_FAILED, http_status=409):
    """Someone else is doing this work now, or there is nothing to do: try again later."""


class IntegrityError(AirsspecError, exit_code=EXIT_FAILED, http_status=500):
    """Stored bytes are damaged or do not check out: ``verify`` shows where."""


class WriteFailedError(AirsspecError, exit_code=EXIT_FAILED, http_status=500):
    """The machine refused a write (disk full, permissions, a failed sync)."""


class ConfigurationError(AirsspecError, exit_code=EXIT_USAGE, http_status=400):
    """The settings or the set-up do not allow this: change the configuration."""


class UnavailableError(AirsspecError, exit_code=EXIT_USAGE, http_status=400):
    """A dependency is missing or cannot be reached (an extra, a model, a store, a server)."""


# ---- bad input ---------------------------------------------------------------------------------


class UsageError(BadInputError):
    """A command-line value that cannot be used."""


class InvalidEventError(BadInputError, EventLogError, ValueError):
    """An event given to ``append`` does not satisfy the schema.

    ``index`` is the position of the event in the batch (0-based), ``field`` the dotted path of
    the offending field when one can be named.
    """

    def __init__(self, message: str, *, index: int = 0, field: str | None = None) -> None:
        self.index = index
        self.field = field
        self.message = message
        where = f"field '{field}': " if field else ""
        super().__init__(f"{where}{message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_invalid, (type(self), self.message, self.index, self.field)


def _rebuild_invalid(
    cls: type[InvalidEventError], message: str, index: int, field: str | None
) -> InvalidEventError:
    error = InvalidEventError.__new__(cls)
    InvalidEventError.__init__(error, message, index=index, field=field)
    return error


class NotCanonicalizableError(InvalidEventError):
    """The value cannot be expressed as canonical JSON (NaN, integers beyond 64 bits, ...):
    an event the log refuses. From ``batch_json`` and ``encode_batch``, ``index`` is the
    body's position and ``field`` the dotted path of the value when one can be named."""


class LineError(NamedTuple):
    """One invalid input line: its number, field and problem (a tuple, not a dataclass: this
    module is imported by the light client, where ``dataclasses`` would cost its start-up)."""

    line: int
    field: str | None
    message: str


class InvalidInputError(InvalidEventError):
    """One or more lines of a JSONL input are not valid events; nothing was appended."""

    def __init__(self, source: str, errors: list[LineError]) -> None:
        self.source = source
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, index=first.line - 1, field=first.field)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.source, self.errors)

    def lines(self) -> list[str]:
        """``source:line: field 'f': message`` for every invalid line."""
        out = []
        for err in self.errors:
            where = f" field '{err.field}':" if err.field else ""
            out.append(f"{self.source}:{err.line}:{where} {err.message}")
        return out

    def report(self) -> list[str]:
        """Every invalid line, then how many (a user fixes the file in one pass), each line
        marked as every error of the command line is."""
        lines = [f"airsspec: error: {line}" for line in self.lines()]
        return [*lines, f"nothing appended: {len(self.errors)} invalid line(s)"]


class InvalidSessionIdError(BadInputError, EventLogError, ValueError):
    """A session id that could escape the log folder or is not a portable file name."""


class InexactJSONError(BadInputError, EventLogError, ValueError):
    """JSON that cannot be stored exactly (a number out of range, NaN, too deep)."""


class UnknownEventTypeError(BadInputError, EventLogError, ValueError):
    """An input event names no type this version can append."""


class SourceError(BadInputError, EventLogError, ValueError):
    """A source file cannot be imported; names the file and the line."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source, self.line, self.message = source, line, message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


class ImportFailedError(SourceError):
    """One or more sources cannot be imported; nothing was appended."""

    def __init__(self, errors: list[SourceError]) -> None:
        self.errors = errors
        super().__init__(errors[0].source, errors[0].line, errors[0].message)

    def report(self) -> list[str]:
        """Every source's problem, then how many."""
        lines = [f"airsspec: error: {error}" for error in self.errors]
        return [*lines, f"nothing imported: {len(self.errors)} source(s) with problems"]


class InvalidQueryError(BadInputError, ValueError):
    """A search or context request that cannot run (empty query, k out of range, bad time)."""


class InvalidBoundError(InvalidQueryError):
    """A seq or a time bounding a read (``--until``, ``--as-of``, ``since``, ``now``) that is
    neither a whole number nor an RFC 3339 time with an offset (see ``eventlog.bound``)."""


class OutputInsideWorkspaceError(InvalidQueryError):
    """A file to write resolves inside the workspace folder (or names no possible path): it
    could overwrite a session's log or a tier's files."""


class AnalyticsError(BadInputError):
    """A query that cannot run: not read-only, or invalid SQL."""


class LearningError(BadInputError, ValueError):
    """A learnings or session request that cannot be done (unknown id, phase or duration)."""


class MemoryFileError(BadInputError, ValueError):
    """A ``/memories`` request that cannot be done as asked (a path outside ``/memories``, an
    ``old_str`` not found once, a line out of range): the message is the one Claude's memory
    tool was trained on."""


class ForgetError(BadInputError, ValueError):
    """A forget request that cannot be done (nothing named, encryption off, a session whose
    records were sealed under its user's key alone)."""


class HookInputError(BadInputError, ValueError):
    """The JSON Claude Code sent is not what a hook expects."""


class HookSettingsError(BadInputError, ValueError):
    """A settings file airsspec will not edit (not JSON, an unexpected shape, a broken link)."""


class TokenError(BadInputError, ValueError):
    """A token request that cannot be done (bad user name, unknown id, damaged file)."""


class InvalidNameError(BadInputError, ValueError):
    """A user, agent or project name that breaks the rule of ``eventlog.names`` (a path, a
    separator, a control character, upper case, not NFC, too long): refused where it enters."""


class BadRequestError(BadInputError, ValueError):
    """A request the HTTP API cannot read (not JSON, not an object)."""


class BodyTooLargeError(BadInputError, ValueError):
    """A request body beyond the API's limit: send less per request."""

    http_status = 413


class BodyTooSlowError(BadInputError, ValueError):
    """A request body whose next part did not arrive in time: send it whole, at once."""

    http_status = 408


class ColdPathError(BadInputError, ValueError):
    """The cold tier's folder is a path Lance refuses."""


# ---- not found ---------------------------------------------------------------------------------


class NotAWorkspaceError(NotFoundError):
    """The path holds no airsspec workspace (and ``create`` was not asked for)."""


class NoSuchSessionError(NotFoundError):
    """The session named has no log in this workspace."""


class NoSuchMemoryFileError(NotFoundError):
    """The ``/memories`` path named holds no file or folder (in this memory's tree)."""


# ---- forbidden ---------------------------------------------------------------------------------


class ScopeError(ForbiddenError):
    """A reader or writer scope may not touch a session: it is owned by someone else, or by
    no one (the caller cannot fix this by retrying)."""


class ReadOnlyTokenError(ForbiddenError):
    """A write asked for with a read-only token."""


class ServerFilesError(ForbiddenError, PermissionError):
    """A hook naming files of the server's machine, sent with a token other than the local
    one: the server would read them as its own user, for whoever holds the token."""


class UnsafePathError(ForbiddenError, EventLogError, OSError):
    """A log, head, state or source file is a symbolic link or not a regular file: refused.

    An ``OSError`` too, so a loader that treats an unreadable derived file as missing (and
    rebuilds it) treats a planted link the same way."""

    def __init__(self, path: Path, what: str = "a symbolic link") -> None:
        self.path = path
        self.what = what
        super().__init__(f"{path}: is {what}; refusing to follow it out of the workspace")

    def __reduce__(self) -> tuple[type, tuple[Path, str]]:
        return type(self), (self.path, self.what)


# ---- conflict / busy ---------------------------------------------------------------------------


class CompactionBusyError(ConflictError, CompactorError):
    """Another compactor (or extractor) holds this session's lock."""


class NothingToCompactError(ConflictError, CompactorError):
    """The session has too few uncovered messages to compact."""


class DaemonBusyError(ConflictError):
    """Another daemon already watches this workspace."""


class LeaseLostError(ConflictError, EventLogError):
    """Another machine took over a bucket lease this one held (a renewal was refused: this
    machine was too slow to renew it); the holder stopped before writing again. Run it again."""


class MemoryFileConflictError(ConflictError):
    """A ``/memories`` write refused as it stands: the file changed since the
    ``content_sha256`` the caller read, or the path to create already exists. Nothing was
    written; read again and retry."""


class SessionExistsError(ConflictError, EventLogError):
    """An append meant to create a session found it already created (another writer got there
    first, under the session's lock): nothing was written. The caller checks who owns it now
    and writes again as an ordinary append, or gives up."""

    def __init__(self, session: str) -> None:
        self.session = session
        super().__init__(
            f"session {session!r} was created by another writer first; nothing was written"
        )

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return type(self), (self.session,)


class SessionMovedError(ConflictError, EventLogError):
    """An append made after a given record (``after``: its seq) found the session's last record
    another (a writer appended since, or none is there yet): nothing was written. The caller
    reads the session again and decides anew."""

    def __init__(self, session: str, after: int, last: int) -> None:
        self.session, self.after, self.last = session, after, last
        super().__init__(
            f"session {session!r}: the append was made after seq {after}, but its last record "
            f"is seq {last}; nothing was written (read it again)"
        )

    def __reduce__(self) -> tuple[type, tuple[str, int, int]]:
        return type(self), (self.session, self.after, self.last)


# ---- integrity / corrupt -----------------------------------------------------------------------


class CorruptLogError(IntegrityError, EventLogError):
    """A stored record cannot be read: bad JSON, schema violation, or a broken sequence."""

    def __init__(self, path: Path, *, seq: int | None, offset: int, reason: str) -> None:
        self.path = path
        self.seq = seq
        self.offset = offset
        self.reason = reason
        at = f"seq {seq}, " if seq is not None else ""
        super().__init__(f"{path}: {at}byte offset {offset}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only arguments: rebuilt by name, so the error crosses a process pool intact
        return _rebuild_corrupt, (self.path, self.seq, self.offset, self.reason)


def _rebuild_corrupt(path: Path, seq: int | None, offset: int, reason: str) -> CorruptLogError:
    return CorruptLogError(path, seq=seq, offset=offset, reason=reason)


class VerifyFailedError(IntegrityError):
    """The log does not verify, so it cannot be sealed (the sessions that fail are named)."""


class HeadError(IntegrityError, EventLogError, ValueError):
    """A head file that cannot be read (damaged, or not written by airsspec)."""

    exit_code, http_status = EXIT_USAGE, 400  # as the command line always exited on it


class SealError(IntegrityError, EventLogError):
    """A seal that cannot be used: unreadable, of another format, or its signature is wrong."""

    exit_code, http_status = EXIT_USAGE, 400  # as the command line always exited on it


class DamagedOutputError(IntegrityError):
    """A tier's saved files cannot be read or written as they are (damaged on disk). The
    runner answers it by rebuilding the tier from the log."""

    exit_code, http_status = EXIT_USAGE, 400  # as the command line always exited on it


class ColdDamagedError(DamagedOutputError):
    """The cold table's files cannot be read or written as they are (damaged on disk)."""


class UnreadableRecordError(IntegrityError):
    """A record the log holds, valid by the catalog, cannot be read as what the code reading it
    writes: a graph checkpoint appended by hand, say. The log is as it was; the record is
    named (``of``)."""

    exit_code, http_status = EXIT_USAGE, 400  # as the other integrity errors a user can cause

    @classmethod
    def of(cls, record: Any, exc: BaseException) -> UnreadableRecordError:
        """The error naming ``record`` (its session, seq and type), which ``exc`` found
        cannot be read as airsspec writes it."""
        return cls(
            f"session {record.session!r}, seq {record.seq}: a {record.type} record that "
            f"airsspec could not have written ({type(exc).__name__}: {exc})"
        )


# ---- write / storage ---------------------------------------------------------------------------


class LogWriteError(WriteFailedError, EventLogError, OSError):
    """The OS refused to write; the log file was truncated back to its previous length."""


class LogSyncError(LogWriteError):
    """An ``fdatasync`` of a log file failed. The OS reports such a failure once and may drop
    the data it held, so the records appended since the last good sync may be missing from the
    disk even though the file still reads them back: the log that saw the failure refuses every
    later append to that file, and its ``flush`` and ``close`` raise it again."""


# ---- configuration -----------------------------------------------------------------------------


class SettingsError(ConfigurationError, ValueError):
    """A configuration value is missing, unknown or not allowed."""


class ServeError(ConfigurationError):
    """The server cannot start as asked (binding beyond loopback without tokens, a busy port)."""


# ---- unavailable dependency --------------------------------------------------------------------


class NativeExtensionMissingError(UnavailableError, ImportError):
    """``AIRSSPEC_REQUIRE_NATIVE=1`` is set and the C extension cannot be imported."""


class EmbedderUnavailable(UnavailableError, RuntimeError):
    """The embedder cannot load or run; callers degrade to full-text search."""


EngineUnavailableError = UnavailableError
"""The Ray engine was asked for but its extra is not installed: the category itself (no caller
catches it apart), the name kept while ``airsspec/ray_engine.py`` raises it by name."""


class KeyStoreError(UnavailableError):
    """A data key cannot be read, made or destroyed (permissions, a damaged key file)."""


class SummarizerError(UnavailableError, CompactorError):
    """A summarizer backend failed (network, API error, bad response); the compactor falls back
    to the extractive summarizer and records that it did."""

    exit_code = EXIT_FAILED  # the work failed, as for every compactor error


class ClientError(UnavailableError, OSError):
    """The server's answer could not be read (it went away mid-request, or is not HTTP)."""

    exit_code = EXIT_FAILED  # as for any failure of the machine to answer


class StorageError(UnavailableError, EventLogError):
    """The store could not be reached or refused a request (network, permissions, bucket);
    nothing was acknowledged by the call that raised it."""

    exit_code = EXIT_FAILED  # the machine failed (the input was fine), as for ClientError


class ConditionalWritesError(StorageError):
    """The store does not enforce create-only writes (``If-None-Match: *``), so two writers
    could both take one seq: refused unless the log is configured for a single writer."""


class SeqTakenError(StorageError):
    """Another writer appended first: the head given to ``append`` is no longer the session's
    end. Re-read the tail (``tail``, when the store already read it), re-chain, retry
    (``ObjectStoreLog`` does)."""

    def __init__(self, message: str, tail: Any = None) -> None:
        super().__init__(message)
        self.tail = tail  # an ``eventlog.recovery.TailState`` or None


class SealExistsError(StorageError):
    """A seal of that name is already stored; seals are never replaced."""


class LeaseTimeoutError(StorageError):
    """Another machine held the lease for longer than this one would wait."""


# ---- naming the field of a validation error ----------------------------------------------------


def field_of(error: Mapping[str, Any], default: str = "") -> str:
    """The dotted field path of one pydantic error (``error["loc"]``), or ``default`` when the
    error is about the whole value."""
    return ".".join(str(part) for part in error["loc"]) or default


def validation_problem(exc: Any, default: str = "line") -> str:
    """``field 'f': message`` for the first problem of a pydantic ``ValidationError``."""
    error = exc.errors()[0]
    return f"field {field_of(error, default)!r}: {error['msg']}"


# Everything above that is public: the exit codes, each error class (and the row type one of
# them carries), and the two field-naming helpers. Written out, so a type checker sees each name
# (``airsspec.errors`` re-exports this list); ``tests/eventlog/test_errors.py`` holds it complete.
__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "AirsspecError",
    "AnalyticsError",
    "BadInputError",
    "BadRequestError",
    "BodyTooLargeError",
    "BodyTooSlowError",
    "ClientError",
    "ColdDamagedError",
    "ColdPathError",
    "CompactionBusyError",
    "CompactorError",
    "ConditionalWritesError",
    "ConfigurationError",
    "ConflictError",
    "CorruptLogError",
    "DaemonBusyError",
    "DamagedOutputError",
    "EmbedderUnavailable",
    "EngineUnavailableError",
    "EventLogError",
    "ForbiddenError",
    "ForgetError",
    "HeadError",
    "HookInputError",
    "HookSettingsError",
    "ImportFailedError",
    "InexactJSONError",
    "IntegrityError",
    "InvalidBoundError",
    "InvalidEventError",
    "InvalidInputError",
    "InvalidNameError",
    "InvalidQueryError",
    "InvalidSessionIdError",
    "KeyStoreError",
    "LearningError",
    "LeaseLostError",
    "LeaseTimeoutError",
    "LineError",
    "LogSyncError",
    "LogWriteError",
    "MemoryFileConflictError",
    "MemoryFileError",
    "NativeExtensionMissingError",
    "NoSuchMemoryFileError",
    "NoSuchSessionError",
    "NotAWorkspaceError",
    "NotCanonicalizableError",
    "NotFoundError",
    "NothingToCompactError",
    "OutputInsideWorkspaceError",
    "ReadOnlyTokenError",
    "ScopeError",
    "SealError",
    "SealExistsError",
    "SeqTakenError",
    "ServeError",
    "ServerFilesError",
    "SessionExistsError",
    "SessionMovedError",
    "SettingsError",
    "SourceError",
    "StorageError",
    "SummarizerError",
    "TokenError",
    "UnavailableError",
    "UnknownEventTypeError",
    "UnreadableRecordError",
    "UnsafePathError",
    "UsageError",
    "VerifyFailedError",
    "WriteFailedError",
    "field_of",
    "validation_problem",
]

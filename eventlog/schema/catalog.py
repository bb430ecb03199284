"""The catalog of event types: each is declared once, here, and nowhere else.

A declaration is a model of the type's own fields (a ``Fields``), decorated with ``event_type``: the
type's name (the ``type`` stored in every record: never rename one), its ``Category`` and, for
a type only airsspec appends, the part of airsspec that writes it. Everything else about a type
is derived from its declaration (``eventlog.schema.models``): the input event a caller appends
(``UserEvent``), the record the log stores (``UserRecord``), the registries (``INPUT_TYPES``,
``RECORD_TYPES``, ``SYSTEM_TYPES``, ``MEMORY_TYPES``, ``MESSAGE_TYPES`` ...), the validators and
the JSON schema. Declaration order is the registries' order.

An optional field marked ``OMIT_NONE`` is left out of the stored record when it is None,
rather than stored as null (and so is a field of that name in any type: the rule goes by
name). The marks shape the stored bytes, so a field once marked (or not) stays so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationInfo

from eventlog.kinds import FactKind, LearningKind, LearningScope, LearningSource
from eventlog.names import check_name, check_scope_value


class Category(StrEnum):
    """What an event type is, for the parts of airsspec that treat types alike."""

    MESSAGE = "message"  # a turn of the conversation: what the user or the agent said or did
    IMPORTED = "imported"  # a foreign record kept as it was, mapped to no message type
    SUMMARY = "summary"  # derived from a range of messages (the compactor's)
    MEMORY = "memory"  # memory management: sessions, learnings, sources (schema version 2)
    STATE = "state"  # an agent framework's state kept on the log (``airsspec.integrations``)


@dataclass(frozen=True, slots=True)
class EventType:
    """One event type as declared: its name, its own fields, its category, and who alone may
    append it (``writer``; None: any caller)."""

    name: str
    fields: type[BaseModel]
    category: Category
    writer: str | None = None


CATALOG: dict[str, EventType] = {}
"""Every event type this version knows, by name, in declaration order."""

_Fields = TypeVar("_Fields", bound=type[BaseModel])


def event_type(
    name: str,
    category: Category,
    writer: str | None = None,
    *,
    catalog: dict[str, EventType] = CATALOG,
) -> Callable[[_Fields], _Fields]:
    """Declare the decorated model as the fields of the event type ``name`` in ``catalog``."""

    def declare(fields: _Fields) -> _Fields:
        if name in catalog:
            raise TypeError(f"event type {name!r} is declared twice")
        catalog[name] = EventType(name, fields, category, writer)
        return fields

    return declare


def class_name(kind: str) -> str:
    """The stem of a type's derived class names: ``session_started`` -> ``SessionStarted``
    (``SessionStartedEvent``, ``SessionStartedRecord``)."""
    return kind.title().replace("_", "")


def event_doc(declared: EventType) -> str:
    """The docstring of a type's input event class."""
    who = "a caller" if declared.writer is None else "airsspec"
    return f"A ``{declared.name}`` event as {who} appends it."


def record_doc(declared: EventType) -> str:
    """The docstring of a type's stored record class."""
    return f"A stored ``{declared.name}`` record."


class _OmitNone:
    """The marker type of ``OMIT_NONE``."""

    def __repr__(self) -> str:
        return "OMIT_NONE"


OMIT_NONE = _OmitNone()
"""Marks (in ``Annotated``) an optional field left out of a stored record when it is None."""


def omitted_when_none(models: list[type[BaseModel]]) -> tuple[str, ...]:
    """The names of the fields marked ``OMIT_NONE`` in ``models``, each once, in order."""
    names = (n for m in models for n, f in m.model_fields.items() if OMIT_NONE in f.metadata)
    return tuple(dict.fromkeys(names))


class Fields(BaseModel):
    """Base of a type's declared fields: its pydantic schema is built on first validation, not
    at import (``defer_build``), so importing the catalog builds no model (issue 46)."""

    model_config = ConfigDict(defer_build=True)


# --------------------------------------------------------------------------- shared parts


class ChunkSummary(BaseModel):
    """One chunk of a compaction: the seq range it covers and its summary."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    messages: int = Field(ge=1)
    summary: str
    tokens: int = Field(ge=0)


class BackendInfo(BaseModel):
    """Which backend wrote derived events, and whether it stood in for another (and why)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    backend: str
    model: str
    fallback_from: str | None = None
    fallback_error: str | None = None


class SummarizerInfo(BackendInfo):
    """Which summarizer produced a compaction, and whether it stood in for another."""

    prompt_version: str


class ExtractorInfo(BackendInfo):
    """Which extractor read a range of records, and whether it stood in for another."""

    version: str


class Evidence(BaseModel):
    """A record a learning came from."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    session: str
    seq: int = Field(ge=1)
    hash: str


def _optional_name(value: str | None, info: ValidationInfo) -> str | None:
    return None if value is None else check_name(value, info.field_name or "user")


_ScopeValue = Annotated[
    str, AfterValidator(lambda v, info: check_scope_value(v, info.field_name)), Field(min_length=1)
]  # a name (``eventlog.names``) or SHARED
_Scope = Annotated[_ScopeValue | None, OMIT_NONE]


class _ScopeFields(Fields):
    """Whose memory a record belongs to (``projections.scopes``): left out when not named."""

    user: _Scope = None
    agent: _Scope = None
    project: _Scope = None


# --------------------------------------------------------------------------- the messages


@event_type("user", Category.MESSAGE)
class _User(Fields):
    content: str


@event_type("assistant", Category.MESSAGE)
class _Assistant(Fields):
    content: str


@event_type("thought", Category.MESSAGE)
class _Thought(Fields):
    content: str


@event_type("action", Category.MESSAGE)
class _Action(Fields):
    tool: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


@event_type("observation", Category.MESSAGE)
class _Observation(Fields):
    result: Any
    action_id: Annotated[str | None, OMIT_NONE] = None
    is_error: StrictBool = False  # "yes", 1 or "on" refused: stored only as given


# --------------------------------------------------------------------------- derived and foreign


@event_type("compaction", Category.SUMMARY, writer="compactor")
class _Compaction(Fields):
    """Everything needed to write ``history-NNN.md`` without calling any summarizer again."""

    library_no: int = Field(ge=1)
    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    first_hash: str
    last_hash: str
    messages: int = Field(ge=1)
    chunks: list[ChunkSummary] = Field(min_length=1)
    summary: str
    summary_tokens: int = Field(ge=0)
    previous_library_no: int | None = None
    summarizer: SummarizerInfo
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)
    reason: str


@event_type("imported", Category.IMPORTED)
class _Imported(Fields):
    """A foreign record this version does not map to a message type (kept, never dropped)."""

    kind: str
    text: str = ""


# --------------------------------------------------------------------------- memory management


@event_type("session_started", Category.MEMORY, writer="session API")
class _SessionStarted(_ScopeFields):
    task: str | None = None
    phase: str | None = None


@event_type("session_assigned", Category.MEMORY, writer="session API")
class _SessionAssigned(_ScopeFields):
    """An admin gave the session to a new owner (``airsspec session assign``): from this
    record on, the session is the named scope's, whoever owned it before."""

    by: str | None = None  # the admin who asked, when known


@event_type("session_ended", Category.MEMORY, writer="session API")
class _SessionEnded(Fields):
    status: str = Field(min_length=1, max_length=200)


@event_type("phase_changed", Category.MEMORY, writer="session API")
class _PhaseChanged(Fields):
    phase: str = Field(min_length=1, max_length=200)


@event_type("learning", Category.MEMORY, writer="learnings API")
class _Learning(_ScopeFields):
    learning_id: str = Field(min_length=1, max_length=200)
    kind: LearningKind
    text: str = Field(min_length=1, max_length=20_000)
    scope: LearningScope
    evidence: list[Evidence] = Field(default_factory=list)
    source: LearningSource
    explicit: bool = False  # stated by the user (not inferred from the agent's work)


@event_type("extracted", Category.MEMORY, writer="extractor")
class _Extracted(Fields):
    """An extractor read ``from_seq..to_seq``; the learnings it found are appended with it."""

    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    extractor: ExtractorInfo
    learnings: int = Field(ge=0)


class Fact(BaseModel):
    """One fact a session's consolidation recorded: what it says, the subject it is about
    (``key``: a later fact of the same kind and key in the same scope supersedes it), whether
    it says that the earlier one stopped holding (``ended``: a task done, a file removed), the
    records it came from, and since when it holds (``since``: the time of the first of them)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: FactKind
    key: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=2000)
    ended: bool = False
    evidence: list[Evidence] = Field(min_length=1)
    since: str = Field(min_length=1, max_length=64)


@event_type("learning_feedback", Category.MEMORY, writer="learnings API")
class _LearningFeedback(Fields):
    learning_id: str = Field(min_length=1)
    verdict: Literal["confirmed", "rejected", "superseded"]
    by: str | None = None  # the learning that supersedes it
    reason: str = ""
    actor: Annotated[str | None, OMIT_NONE] = Field(default=None, max_length=200)  # who gave it


@event_type("learning_edited", Category.MEMORY, writer="learnings API")
class _LearningEdited(Fields):
    """A person curated a learning (``airsspec learnings edit``, the viewer's form): from this
    record on it reads ``text`` and applies at ``scope`` (each None: unchanged). The
    ``learning`` record keeps what was first recorded; ``actor`` is who edited it."""

    learning_id: str = Field(min_length=1, max_length=200)
    text: Annotated[str | None, OMIT_NONE] = Field(default=None, min_length=1, max_length=20_000)
    scope: Annotated[LearningScope | None, OMIT_NONE] = None
    actor: str = Field(min_length=1, max_length=200)
    reason: str = ""


@event_type("facts_recorded", Category.MEMORY, writer="consolidation")
class _FactsRecorded(Fields):
    """A session's consolidation read ``from_seq..to_seq`` and recorded its facts (the
    extractive rules', or Claude's: a replay reads them here and never calls a model)."""

    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    extractor: ExtractorInfo
    facts: list[Fact] = Field(default_factory=list)


@event_type("memory_accessed", Category.MEMORY, writer="context builder")
class _MemoryAccessed(_ScopeFields):  # the scope fields: who read (left out for an admin)
    learning_ids: list[str]  # what was returned
    matched: list[str] = Field(default_factory=list)  # those that matched the task or query
    purpose: Literal["context", "recall"]
    reader: str  # the session (or tool) the learnings were given to
    query: str | None = None


@event_type("archived", Category.MEMORY, writer="housekeeping")
class _Archived(Fields):
    learning_ids: list[str] = Field(min_length=1)
    reason: str


@event_type("restored", Category.MEMORY, writer="housekeeping")
class _Restored(Fields):
    learning_id: str = Field(min_length=1)


@event_type("source_indexed", Category.MEMORY, writer="source registry")
class _SourceIndexed(Fields):
    path: str = Field(min_length=1)  # under sources/, with "/" between folders
    size: int | None = Field(default=None, ge=0)  # None: the file was removed
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # the owner of a document under sources/users/USER/ (forget --user removes it)
    user: Annotated[str | None, AfterValidator(_optional_name)] = None


@event_type("forgotten", Category.MEMORY, writer="privacy API")
class _Forgotten(Fields):
    """A subject was forgotten (``airsspec forget``): its keys destroyed, its copies purged."""

    subject: Literal["user", "session"]
    name: str = Field(min_length=1, max_length=200)  # whom: the user or session id
    by: str = Field(min_length=1, max_length=200)  # who asked
    sessions: list[str] = Field(default_factory=list)  # the sessions it covered
    keys: list[str] = Field(default_factory=list)  # the ids of the keys destroyed


# --------------------------------------------------------------------------- memory files

_Sha256 = Annotated[str | None, Field(pattern=r"^[0-9a-f]{64}$")]
MemoryFileCommand = Literal["create", "str_replace", "insert", "write"]
"""What changed a memory file: one of the memory tool's commands, or a plain ``write``."""


class _MemoryFileFields(_ScopeFields):
    """Whose ``/memories`` tree a change is in (its ``user`` and ``project``) and the agent
    that made it (``agent``, with ``actor``: what made it, a tool or a model), as written by
    the memory files API (``airsspec.memory.files``)."""

    actor: Annotated[str | None, OMIT_NONE] = Field(default=None, max_length=200)


@event_type("memory_file_written", Category.MEMORY, writer="memory files API")
class _MemoryFileWritten(_MemoryFileFields):
    """A ``/memories`` file created or changed: its whole new text, the SHA-256 of that text's
    UTF-8 bytes, and the SHA-256 it replaced (None: it did not exist)."""

    path: str = Field(min_length=1, max_length=4096)
    text: str
    content_sha256: _Sha256
    previous_sha256: _Sha256 = None
    command: MemoryFileCommand


@event_type("memory_file_renamed", Category.MEMORY, writer="memory files API")
class _MemoryFileRenamed(_MemoryFileFields):
    """A ``/memories`` file or folder moved from ``old_path`` to ``new_path`` (every file
    under a folder moves with it)."""

    old_path: str = Field(min_length=1, max_length=4096)
    new_path: str = Field(min_length=1, max_length=4096)


@event_type("memory_file_deleted", Category.MEMORY, writer="memory files API")
class _MemoryFileDeleted(_MemoryFileFields):
    """A ``/memories`` file or folder deleted (every file under a folder with it); ``all``:
    the whole tree cleared (``clear_all_memory``)."""

    path: str = Field(min_length=1, max_length=4096)
    all: bool = False


# --------------------------------------------------------------------------- captured API calls


@event_type("messages_request", Category.MEMORY, writer="messages capture")
class _MessagesRequest(Fields):
    """A Messages API request as sent (``airsspec.memory.capture``), kept so that its body is
    rebuilt byte for byte: ``body_params``, the body's JSON text without ``messages`` (whose place
    among its keys is ``messages_at``), and the messages as the conversation the log holds
    gives its first ``reused``, then the JSON text of each one it ``added``."""

    body_params: str = Field(min_length=2)  # not ``params``: an action's is an object
    messages_at: int = Field(ge=0)
    reused: int = Field(ge=0)
    added: list[str]


@event_type("messages_response", Category.MEMORY, writer="messages capture")
class _MessagesResponse(Fields):
    """The Messages API response to the request before it, its body's JSON text as received:
    a ``compaction`` block's ``encrypted_content`` and ``context_management.applied_edits``
    among the rest, byte for byte; ``compacted`` and ``applied_edits`` say at a glance
    whether the server compacted the context or edited it."""

    body: str = Field(min_length=2)
    compacted: bool = False
    applied_edits: int = Field(default=0, ge=0)


@event_type("visualized", Category.MEMORY, writer="visual policy")
class _Visualized(Fields):
    """The session left the warm part of its project's context: library page ``library_no``
    (its latest) is read as images from now on (``projections.visual``). Nothing is deleted."""

    library_no: int = Field(ge=1)
    reason: str = Field(min_length=1, max_length=500)
    project: Annotated[str | None, OMIT_NONE] = None  # the project whose warm part it left


# --------------------------------------------------------------------------- framework state
# What an agent framework keeps through ``airsspec.integrations``, appended by its adapter
# through ``Memory.append`` (any caller may): the framework's own objects are folded back from
# these (``projections.agent_items``, ``projections.graph_state``), so each edit is a record that
# ``replay`` shows and ``verify`` covers. A graph's values (its checkpoints, channel values and
# writes) are kept as ``{"json": value}`` when plain JSON, else as its serializer wrote them
# (``{"type": ..., "data": base64}``).


@event_type("item_popped", Category.STATE)
class _ItemPopped(Fields):
    """An agents SDK session's last item was removed (``pop_item``): the record it was."""

    of_seq: int = Field(ge=1)


@event_type("items_cleared", Category.STATE)
class _ItemsCleared(Fields):
    """An agents SDK session's items were all removed (``clear_session``)."""


_Namespace = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


@event_type("store_put", Category.STATE)
class _StorePut(Fields):
    """A graph store's item was written: its namespace, key and value (a JSON object)."""

    namespace: _Namespace
    key: str = Field(min_length=1)
    value: dict[str, Any]
    index: list[str] | bool = True  # the value's fields searched (True: all; False: none)
    ttl: float | None = Field(default=None, gt=0)  # minutes from its last write or read


@event_type("store_deleted", Category.STATE)
class _StoreDeleted(Fields):
    """A graph store's item was deleted, by its owner or because its time to live ran out."""

    namespace: _Namespace
    key: str = Field(min_length=1)
    reason: Literal["deleted", "expired"] = "deleted"


@event_type("store_touched", Category.STATE)
class _StoreTouched(Fields):
    """A graph store's items were read with ``refresh_ttl``: their time to live starts again."""

    items: list[tuple[_Namespace, str]] = Field(min_length=1)


@event_type("checkpoint", Category.STATE)
class _Checkpoint(Fields):
    """A graph thread's checkpoint (in the session named after the thread): the checkpoint
    without its channel values, its metadata, and the values of the channels it changed."""

    checkpoint_ns: str = ""
    checkpoint_id: str = Field(min_length=1)
    parent_id: str | None = None
    checkpoint: dict[str, Any]  # serialized
    metadata: dict[str, Any]  # serialized
    blobs: dict[str, Any] = Field(default_factory=dict)  # channel -> {version, value}


@event_type("checkpoint_writes", Category.STATE)
class _CheckpointWrites(Fields):
    """A task's pending writes against a checkpoint of a graph thread."""

    checkpoint_ns: str = ""
    checkpoint_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    task_path: str = ""
    writes: list[dict[str, Any]]  # {channel, idx, value (serialized)}


@event_type("thread_deleted", Category.STATE)
class _ThreadDeleted(Fields):
    """A graph thread's checkpoints and writes were deleted (``delete_thread``)."""

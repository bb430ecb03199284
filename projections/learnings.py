"""The learnings tier: per session, what the log says about the session and the learnings in it.

Where the events live: a session's own log holds its lifecycle (``session_started``,
``phase_changed``, ``session_ended``) and the learnings extracted from it (``learning``, then one
``extracted`` naming the records read). The workspace's own log, session ``airsspec.memory``,
holds everything that is about learnings rather than about one conversation: learnings a user
adds without a session, feedback (``learning_feedback``) and a person's edits of a learning's
text or scope (``learning_edited``, each with its actor), what each context build or recall
returned and to whom (``memory_accessed``), and housekeeping (``archived``, ``restored``).
Nothing is ever deleted: archiving changes what is loaded, and a restore undoes it.

The fold (``LearningsProjector``) keeps facts only: what was recorded, when, and what happened
to it. Tiers, confidence, priority and conflicts depend on the time of asking, so they are
computed when read (``projections.learning_rules.assess``) from these facts and a clock value
that is an input: ``--as-of`` gives the tiers as they were. State file per session
(``state/learnings/{session}.json``), canonical JSON, saved with its checkpoint; incremental
equals rebuild like every tier.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from eventlog.crypto import is_forgotten
from eventlog.errors import InvalidNameError
from eventlog.fast_input import CONVERSATION_TYPES
from eventlog.overrides import override
from eventlog.plain import modelled
from projections import facts
from projections.files import KeptOnDisk, ParsedOnce
from projections.fold import Projector
from projections.scopes import Scope
from projections.state_index import StateIndex
from projections.state_store import JsonStore, StateStore

if TYPE_CHECKING:  # the record classes are named by the fold, when there are records
    from eventlog.schema import (
        ActionRecord,
        Record,
    )

# 6: an edit keeps its record's session and seq (the cold unit of its text); 5: the facts a
# session's consolidation recorded (``projections.facts``); 4: edits
# (``learning_edited``) and the actor of a verdict; 3: an assignment
# (``session_assigned``) replaces the session's owner, and a learning keeps only
# the owner recorded with it (else its session's, when read); 2: owners (``info["owner"]``)
STATE_VERSION = 6
# Tools whose parameters name a file they change (Claude Code's, OpenHands', and plain names).
EDIT_TOOLS = frozenset(
    {"Edit", "MultiEdit", "Write", "NotebookEdit", "str_replace_editor", "edit_file", "write_file"}
)
_PATH_PARAMS = ("file_path", "path", "notebook_path", "filename")


@dataclass(slots=True)
class LearningsState:
    """One session's facts: its lifecycle, the learnings and consolidated facts recorded in
    its log, and (for the workspace's own log) feedback, edits, accesses, archives and
    restores, in log order."""

    session: str
    info: dict[str, Any] = field(default_factory=dict)
    learnings: list[dict[str, Any]] = field(default_factory=list)
    feedback: list[dict[str, Any]] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    accesses: list[dict[str, Any]] = field(default_factory=list)
    housekeeping: list[dict[str, Any]] = field(default_factory=list)
    extracted_through: int = 0
    files_changed: list[str] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)  # ``projections.facts``
    facts_through: int = 0  # the last seq a consolidation recorded facts of


def _edited_path(record: ActionRecord) -> str | None:
    if record.tool not in EDIT_TOOLS:
        return None
    for key in _PATH_PARAMS:
        value = record.params.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def fold(state: LearningsState, record: Record) -> LearningsState:
    """Fold one record into the session's facts (pure). A message may be its stored dict
    (``eventlog.plain.Stored``: read by attribute alike); any other record is made its model."""
    info = state.info
    if record.type in CONVERSATION_TYPES:
        info["messages"] = info.get("messages", 0) + 1
        info.setdefault("first_ts", record.ts)
        info["last_ts"] = record.ts
        info["last_seq"] = record.seq
        if record.type == "user" and "first_user_seq" not in info:
            info["first_user_seq"] = record.seq
        path = _edited_path(cast("ActionRecord", record)) if record.type == "action" else None
        if path is not None and path not in state.files_changed:
            state.files_changed.append(path)
        return state
    from eventlog.schema import records as kinds  # each class made once, then an attribute

    record = modelled(record)
    if isinstance(record, kinds.SessionStartedRecord):
        info.update(started=record.ts, task=record.task, status="active", ended=None)
        owner = Scope.of(record.__dict__).to_fields()
        if owner and "owner" not in info:  # the first scope recorded owns the session
            info["owner"] = owner
        if record.phase is not None:
            info["phase"] = record.phase
            info.setdefault("phases", []).append({"phase": record.phase, "ts": record.ts})
    elif isinstance(record, kinds.SessionAssignedRecord):
        info["owner"] = Scope.of(record.__dict__).to_fields()
    elif isinstance(record, kinds.PhaseChangedRecord):
        info["phase"] = record.phase
        info.setdefault("phases", []).append({"phase": record.phase, "ts": record.ts})
    elif isinstance(record, kinds.SessionEndedRecord):
        info.update(status=record.status, ended=record.ts)
    elif isinstance(record, kinds.LearningRecord) and not is_forgotten(record):
        state.learnings.append(
            {
                "id": record.learning_id,
                "kind": record.kind,
                "text": record.text,
                "scope": record.scope,
                "source": record.source,
                "explicit": record.explicit,
                "evidence": [e.model_dump() for e in record.evidence],
                "session": record.session,
                "seq": record.seq,
                "ts": record.ts,
                # recorded with the learning, else its session's owner when it is read (an
                # assignment moves a session's learnings with it)
                "owner": Scope.of(record.__dict__).to_fields(),
            }
        )
    elif isinstance(record, kinds.ExtractedRecord):
        state.extracted_through = max(state.extracted_through, record.to_seq)
    elif isinstance(record, kinds.FactsRecordedRecord):
        facts.fold(state, record, forgotten=is_forgotten(record))
    elif isinstance(record, kinds.LearningFeedbackRecord):
        state.feedback.append(
            {
                "id": record.learning_id,
                "verdict": record.verdict,
                "by": record.by,
                "reason": record.reason,
                "actor": record.actor,
                "ts": record.ts,
            }
        )
    elif isinstance(record, kinds.LearningEditedRecord) and not is_forgotten(record):
        state.edits.append(
            {
                "id": record.learning_id,
                "text": record.text,
                "scope": record.scope,
                "actor": record.actor,
                "reason": record.reason,
                "ts": record.ts,
                "unit": f"{record.session}:{record.seq}:0",  # its text's, when it gave one
            }
        )
    elif isinstance(record, kinds.MemoryAccessedRecord):
        state.accesses.append(
            {
                "ids": record.learning_ids,
                "matched": record.matched,
                "purpose": record.purpose,
                "reader": record.reader,
                "ts": record.ts,
            }
        )
    elif isinstance(record, kinds.ArchivedRecord):
        state.housekeeping.append(
            {"op": "archive", "ids": record.learning_ids, "reason": record.reason, "ts": record.ts}
        )
    elif isinstance(record, kinds.RestoredRecord):
        state.housekeeping.append({"op": "restore", "ids": [record.learning_id], "ts": record.ts})
    return state


# state folder -> session -> (the identity of its state file, the state read from it)
_LOADED: dict[str, dict[str, tuple[list[int], LearningsState]]] = {}


def _is_owner(value: object) -> bool:
    """Whether ``value`` is an owner as the fold records it (``Scope.to_fields``): any other
    entry of the index (damaged, or written by hand) is read again from its state, never
    trusted (a null owner would make the session everyone's; a number, a traceback)."""
    if not isinstance(value, dict):
        return False
    try:
        return Scope.of(value).to_fields() == value
    except InvalidNameError:
        return False


# each field of a state and the type its value has (its annotation's outer type)
_FIELDS = {
    f.name: {"str": str, "int": int, "dict": dict, "list": list}[str(f.type).partition("[")[0]]
    for f in fields(LearningsState)
}


def _is_state(value: object) -> bool:
    """Whether ``value`` holds a ``LearningsState``'s fields, each of its type, the owner one
    as the fold records it (``_is_owner``); any other entry of the states index (damaged, or
    written by hand) is read again from its state."""
    return (
        isinstance(value, dict)
        and value.keys() == _FIELDS.keys()
        and all(type(value[name]) is kind for name, kind in _FIELDS.items())
        and _is_owner(value["info"].get("owner", {}))
    )


def _owner(state: LearningsState) -> dict[str, str]:
    """The session's owner (its scope's fields; empty: no one's), what the owners index holds."""
    return cast("dict[str, str]", state.info.get("owner") or {})


# each index's verdict of ``LearningsStore.damage``, kept while it and the manifest are unchanged
_CHECKED: ParsedOnce[list[str]] = ParsedOnce(settle_ns=1_000_000_000)


def _problems(value: object) -> list[str]:
    """A verdict as kept on disk (anything else is checked again)."""
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise TypeError(f"not a verdict: {value!r}")
    return value


class LearningsStore(JsonStore[LearningsState]):
    """The learnings' states, with the owners and states indexes beside them (``held``: each
    with what it holds of a state), which follow a dropped state and a reset as every store's
    do (``SessionFilesStore.indexes``), and this process's ``_LOADED`` too, so no learning's
    text, fact or owner outlives its state. An entry edited by hand with its state's identity
    kept is taken for the state: a deep check finds it (``damage``) and deletes the indexes."""

    def __init__(
        self,
        out_dir: Path,
        fold: Any,
        held: tuple[tuple[StateIndex, Callable[[LearningsState], object]], ...],
    ) -> None:
        super().__init__(out_dir, fold)
        self.held = held  # each index, with what it holds of a state
        self.indexes = tuple(index for index, _ in held)

    @override
    def drop(self, session: str) -> None:
        super().drop(session)
        _LOADED.get(str(self.out_dir), {}).pop(session, None)

    @override
    def damage(self) -> list[str]:
        """Each index entry taken for its state (its identity the manifest's) that is not what
        the state holds, found by reading every such state; the verdict kept while the index
        and the manifest are unchanged, in this process and across processes
        (``state/caches/{tier}.checked.json``: ``status`` asks on every request, a new process
        would read every state; a state that changes changes its identity, which the manifest
        records)."""
        problems = []
        caches = self.out_dir.parent / "caches"
        kept = KeptOnDisk(caches / f"{self.out_dir.name}.checked.json", list, _problems)
        beside = (self.manifest.path,)
        for index, held in self.held:
            check = functools.partial(self._damaged, index, held)
            try:
                problems += _CHECKED.get(
                    index.path, functools.partial(kept.get, index.path, check, None, beside), beside
                )
            except OSError:  # no index (or no manifest): nothing is taken from one
                continue
        kept.save()
        return problems

    def _damaged(self, index: StateIndex, held: Callable[[LearningsState], object]) -> list[str]:
        manifest = self.read_manifest()
        problems = []
        for session, (identity, value) in index.read().items():
            entry = manifest.get(session)
            if entry is None or entry.output != identity:
                continue  # not taken for the state: read from it instead
            loaded = self.load(session)
            if loaded is None or held(loaded[0]) != value:
                problems.append(f"{index.path.name}: {session}'s entry is not its state's")
        return problems

    @override
    def repair(self, problems: list[str]) -> bool:
        """The indexes are deleted, and what this process took from them: every value is read
        from its state, and indexed again."""
        _LOADED.pop(str(self.out_dir), None)
        for index in self.indexes:
            index.remove()
        return True


class LearningsProjector(Projector[LearningsState]):
    """Folds each session into its facts (see the module)."""

    name = "learnings"
    plain = True  # a message is folded from its stored dict (``fold``)

    def __init__(self, out_dir: Path) -> None:
        self.owners_index = self._index(out_dir, "owners", _is_owner)
        self.states_index = self._index(out_dir, "states", _is_state)
        self.state_store: StateStore[LearningsState] = LearningsStore(
            out_dir, self, ((self.owners_index, _owner), (self.states_index, asdict))
        )

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {"version": STATE_VERSION}

    @override
    def empty(self, session: str) -> LearningsState:
        return LearningsState(session)

    @override
    def apply(self, state: LearningsState, record: Record) -> LearningsState:
        return fold(state, record)

    def dump(self, state: LearningsState) -> dict[str, Any]:
        """The state as stored (``JsonStore``)."""
        return {"state": asdict(state)}

    def restore(self, session: str, data: dict[str, Any]) -> LearningsState:
        """The state from what ``dump`` stored."""
        return LearningsState(**data["state"])

    def states(self) -> list[LearningsState]:
        """Every session's saved facts (a damaged file is skipped: the next catch-up rebuilds
        it). Every read asks for them (the gate's owners, the learnings, the facts), so a
        state is loaded once per process while the manifest, written after each catch-up,
        records its file unchanged (``_LOADED``), and a new process takes it from the states
        index (``learnings.states.json``) while the identity indexed is the manifest's:
        one file read, not every session's. Shared, so never changed by the caller."""
        store = self.state_store
        manifest = store.read_manifest()
        if not manifest:
            return [loaded[0] for s in store.sessions() if (loaded := store.load(s))]
        loaded_here = _LOADED.setdefault(str(store.out_dir), {})
        index = self.states_index.read()
        found: list[LearningsState] = []
        read: dict[str, list[Any]] = {}  # sessions read from their state files
        for session, entry in manifest.items():
            known = loaded_here.get(session)
            if known is not None and known[0] == entry.output:
                state = known[1]
            else:
                indexed = index.get(session)
                if indexed is not None and indexed[0] == entry.output:
                    state = LearningsState(**indexed[1])
                elif (loaded := store.load(session)) is not None:
                    state = loaded[0]
                    read[session] = [entry.output, asdict(state)]
                else:
                    continue
                if entry.output is not None:
                    loaded_here[session] = (entry.output, state)
            found.append(state)
        if read:  # the index follows the fold: what was read from a state, and no one gone
            self.states_index.follow(read, {s: e.output for s, e in manifest.items()}.get)
        return found

    def owners(self) -> dict[str, dict[str, str]]:
        """Each folded session's owner (its scope's fields; empty: no one's): the gate's input
        on every read. Kept in an index beside the states (``learnings.owners.json``), each
        owner with the identity of the state file it was read from: an owner whose file the
        manifest records unchanged is taken from the index, any other is read from its state
        and the index written again, so the index follows the fold session by session and a
        new process reads one file, not every state."""
        store = self.state_store
        manifest = store.read_manifest()
        if not manifest:
            return {s.session: _owner(s) for s in self.states()}
        index = self.owners_index.read()
        found: dict[str, dict[str, str]] = {}
        kept: dict[str, list[Any]] = {}
        for session, entry in manifest.items():
            known = index.get(session)
            if known is None or entry.output is None or known[0] != entry.output:
                loaded = store.load(session)
                if loaded is None:
                    continue
                known = [entry.output, _owner(loaded[0])]
            found[session] = known[1]
            if entry.output is not None:
                kept[session] = known
        self.owners_index.write(kept)
        return found

    @staticmethod
    def _index(out: Path, name: str, valid: Callable[[object], bool]) -> StateIndex:
        """The index of ``name`` beside the states (``projections.state_index``)."""
        return StateIndex(out.with_name(f"{out.name}.{name}.json"), valid)

    @override
    def item_count(self) -> int:
        return sum(len(s.learnings) for s in self.states())

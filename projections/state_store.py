"""Where a projection's states are kept: ``StateStore`` and its folder implementations.

A store saves a session's state and its checkpoint together, atomically (write then rename),
so after a crash a projection is either before or after a save; loads them back (None when
absent, unreadable, or made under other settings: the session is then folded from zero); and
keeps the projection's manifest (``projections.checkpoints.Manifest``) of the files it wrote.

- ``SessionFilesStore``: one file per session, ``{out_dir}/{session}{suffix}``, holding the state
  and the checkpoint (a tier encodes its state in its own format: JSON, Parquet).
- ``JsonStore``: the JSON one most tiers use: ``{"fingerprint", "checkpoint", **dump(state)}``
  with sorted keys, so the bytes depend only on the records folded.
- ``projections.bucket_store.BucketStore`` publishes the same bytes to an object store, with
  conditional writes, for machines that share one log.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import orjson

from eventlog.layout import read_nofollow, validate_session_id
from eventlog.overrides import override
from projections.checkpoints import Checkpoint, Manifest, ManifestEntry, file_identity, files_state
from projections.files import KeptOnDisk, atomic_write, folder_size, kept_digest, writer_lock
from projections.fold import Fold
from projections.state_index import StateIndex

S = TypeVar("S")


class StateStore(ABC, Generic[S]):
    """The saved states of one projection (``fold``) under ``out_dir``, and its manifest."""

    forkable: ClassVar[bool] = True  # may it save from forked workers?

    def __init__(self, out_dir: Path, fold: Fold[S]) -> None:
        self.out_dir = out_dir
        self.fold = fold
        # Beside the output folder, not in it: the folder holds only deterministic output.
        self.manifest = Manifest(out_dir.with_name(f"{out_dir.name}.manifest.json"))

    @abstractmethod
    def load(self, session: str) -> tuple[S, Checkpoint] | None:
        """The saved state and its checkpoint; None if absent, unreadable, or made under other
        settings (see ``Fold.fingerprint``)."""

    @abstractmethod
    def save(self, session: str, state: S, checkpoint: Checkpoint) -> None:
        """Persist state and checkpoint together, atomically."""

    @abstractmethod
    def drop(self, session: str) -> None:
        """Delete the session's output."""

    @abstractmethod
    def sessions(self) -> list[str]:
        """Sessions this store has output for."""

    def has_output(self, session: str) -> bool:
        """Whether the session has saved output."""
        return session in self.sessions()

    def output_files(self, session: str) -> list[str]:
        """The files holding the session's saved output; empty for a store that keeps none per
        session."""
        return []

    def reset(self) -> None:
        """Delete every output (before a rebuild)."""
        for session in self.sessions():
            self.drop(session)
        self.manifest.remove()

    def exclusive(self) -> AbstractContextManager[object]:
        """Held for a whole catch-up: one writer of this projection at a time, across threads
        and processes, so a writer that folded less never saves over one that folded more
        (nor records a manifest entry for output another wrote)."""
        return writer_lock(self.out_dir.with_name(f"{self.out_dir.name}.lock"))

    def disk_bytes(self) -> int:
        """Bytes the projection takes on disk (for ``status``)."""
        return folder_size(self.out_dir)

    def damage(self) -> list[str]:
        """What is wrong with files the tier's sessions share, each named, found by reading them
        whole (a deep check: ``status``, ``verify --tiers``, ``project``). Empty by default:
        per-session files are compared with their digests (``output_changed``)."""
        return []

    def repair(self, problems: list[str]) -> bool:
        """Repair the ``damage`` found in place, if this store can (True); else (the default)
        the runner rebuilds the tier from the log."""
        return False

    def finish(self) -> None:
        """Work after each catch-up, once its sessions are saved (index upkeep, say)."""

    # The manifest: a cache of checkpoints, so an idle catch-up does not open every state file.

    def read_manifest(self) -> dict[str, ManifestEntry]:
        """Cached entries per session (empty if written under other settings)."""
        return self.manifest.read(self.fold.fingerprint())

    def write_manifest(self, entries: dict[str, ManifestEntry]) -> None:
        """Save the manifest after the outputs it describes."""
        self.manifest.write(entries, self.fold.fingerprint())

    def output_state(
        self, session: str, *, digest: bool, kept: KeptOnDisk[str] | None = None
    ) -> tuple[list[int] | None, str | None]:
        """The identity of the session's output files and, with ``digest``, their SHA-256
        (``kept``: as ``digests_kept`` keeps them across processes)."""
        return files_state(self.output_files(session), digest=digest, kept=kept)

    def digests_kept(self) -> KeptOnDisk[str]:
        """The digests of the sessions' output files kept across processes, for the deep
        checks every ``status`` makes (``state/caches/{tier}.digests.json``; derived)."""
        caches = self.out_dir.parent / "caches"
        return KeptOnDisk(caches / f"{self.out_dir.name}.digests.json", str, kept_digest)

    def output_changed(
        self,
        session: str,
        cached: ManifestEntry | None,
        *,
        deep: bool,
        kept: KeptOnDisk[str] | None = None,
    ) -> bool:
        """Was the session's output deleted or changed after the catch-up that ``cached``
        records? Identities only, or (``deep``) the content's digest too (``kept``: see
        ``output_state``). An idle catch-up trusts the manifest only while this is false."""
        if cached is None or cached.output is None:
            return False
        if not (deep and cached.digest is not None):  # every session, at each read: stats only
            files = self.output_files(session)
            if len(files) == 1:  # most tiers
                return cached.output != file_identity(files[0])
            return cached.output != files_state(files, digest=False)[0]
        identity, digest = self.output_state(session, digest=True, kept=kept)
        return cached.output != identity or cached.digest != digest


class FileStateStore(StateStore[S]):
    """A store whose checkpoint of a session is one file, ``path(session)``, that says where the
    session's state stands whole: what a bucket publishes (``projections.bucket_store``)."""

    @abstractmethod
    def path(self, session: str) -> Path:
        """The session's state (or checkpoint) file."""

    @abstractmethod
    def read(self, session: str, data: bytes) -> tuple[S, Checkpoint] | None:
        """State and checkpoint from the bytes of such a file; None if damaged or made under
        other settings."""

    def write(self, session: str, data: bytes) -> None:
        """Replace the session's file by ``data``, atomically."""
        atomic_write(self.path(session), data)

    @override
    def load(self, session: str) -> tuple[S, Checkpoint] | None:
        try:
            data = read_nofollow(self.path(session))
        except OSError:
            return None
        return self.read(session, data)


class SessionFilesStore(FileStateStore[S]):
    """One file per session, ``{out_dir}/{session}{suffix}``, holding state and checkpoint;
    a tier says how its state is encoded (``encode``, ``decode``)."""

    suffix: ClassVar[str] = ".json"
    # What ``decode`` raises on bytes it cannot read (the session is then folded from zero).
    unreadable: ClassVar[tuple[type[Exception], ...]] = (OSError, ValueError, KeyError, TypeError)

    def __init__(self, out_dir: Path, fold: Fold[S]) -> None:
        super().__init__(out_dir, fold)
        self._out = str(out_dir)
        self._out_slash = os.path.join(self._out, "")
        # What reads take of each state, kept beside the states (``projections.state_index``):
        # a dropped state leaves them (forgotten, its log gone, found changed), a reset deletes
        # them, so no value outlives its state there.
        self.indexes: tuple[StateIndex, ...] = ()

    @abstractmethod
    def encode(self, state: S, checkpoint: Checkpoint) -> bytes:
        """The bytes of the state file (a function of the records folded only)."""

    @abstractmethod
    def decode(self, session: str, data: bytes) -> tuple[S, Checkpoint] | None:
        """State and checkpoint from a state file's bytes; None if made under other settings;
        raises one of ``unreadable`` if damaged."""

    @override
    def path(self, session: str) -> Path:
        return self.out_dir / f"{validate_session_id(session)}{self.suffix}"

    @override
    def read(self, session: str, data: bytes) -> tuple[S, Checkpoint] | None:
        try:
            return self.decode(session, data)
        except self.unreadable:
            return None

    @override
    def save(self, session: str, state: S, checkpoint: Checkpoint) -> None:
        self.write(session, self.encode(state, checkpoint))

    @override
    def drop(self, session: str) -> None:
        self.path(session).unlink(missing_ok=True)
        for index in self.indexes:
            index.purge([session])

    @override
    def reset(self) -> None:
        for index in self.indexes:  # first: no drop below writes one again
            index.remove()
        super().reset()

    @override
    def has_output(self, session: str) -> bool:
        return self.path(session).exists()

    @override
    def output_files(self, session: str) -> list[str]:
        # ``session`` comes from the log's listing (already validated): skip Path overhead,
        # this runs for every session on every catch-up.
        return [self._out_slash + session + self.suffix]

    @override
    def sessions(self) -> list[str]:
        try:  # the names only: ``status`` lists every tier's, each request of a server
            names = os.listdir(self._out)
        except (FileNotFoundError, NotADirectoryError):
            return []
        cut = len(self.suffix)
        return sorted(n[:-cut] for n in names if n.endswith(self.suffix) and n[0] != ".")


class JsonFold(Protocol[S]):
    """A fold whose state is a JSON object: ``dump`` and ``restore`` are inverse and pure."""

    def fingerprint(self) -> dict[str, Any]:
        """As ``Fold.fingerprint``."""
        ...

    def dump(self, state: S) -> dict[str, Any]:
        """The state's fields as stored (besides ``fingerprint`` and ``checkpoint``)."""
        ...

    def restore(self, session: str, data: dict[str, Any]) -> S:
        """The state from what ``dump`` stored."""
        ...


class JsonStore(SessionFilesStore[S]):
    """``{"fingerprint", "checkpoint", **dump(state)}`` per session, keys sorted."""

    def __init__(self, out_dir: Path, fold: Any) -> None:
        super().__init__(out_dir, fold)
        self.codec: JsonFold[S] = fold

    @override
    def encode(self, state: S, checkpoint: Checkpoint) -> bytes:
        data = {
            **self.codec.dump(state),
            "checkpoint": checkpoint.to_json(),
            "fingerprint": self.codec.fingerprint(),
        }
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)

    @override
    def decode(self, session: str, data: bytes) -> tuple[S, Checkpoint] | None:
        found = orjson.loads(data)
        if found["fingerprint"] != self.codec.fingerprint():
            return None
        return self.codec.restore(session, found), Checkpoint.from_json(found["checkpoint"])

"""The embedding cache: vectors keyed by (model id, SHA-256 of the text).

A cache, never a source of truth: delete it and the next rebuild embeds again, to the same
vectors (embedders are deterministic per text). With it, a rebuild of the cold tier re-embeds
nothing it embedded before. A damaged cache (not a database, a vector of the wrong size) is set
aside as ``*.corrupt-<time>`` with a warning and started afresh. SQLite in WAL mode, so several
processes may share it; the model id names the exact model files, so vectors of another model
are never returned.

Each vector is also listed under its owners (``owners``): the session whose record it was
embedded for, or ``src:PATH`` for a document. Forgetting can then remove vectors by owner once
their texts can no longer be read (a machine that follows a ``forget`` run elsewhere has no key
left to hash them with). A cache made before that list existed has vectors of unknown owners:
``discard_owners`` empties it.
Neither discard can search a damaged cache or a copy set aside: they are removed whole.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections.embedders import Embedder

if TYPE_CHECKING:  # imported when a text is embedded, not by a command that lists the tiers
    import numpy as np

logger = logging.getLogger(__name__)
_LOOKUP_CHUNK = 500  # under SQLite's bound-parameter limit


def text_sha256(text: str) -> str:
    """The SHA-256 of a text (the cache key with the model id)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CacheStats:
    """Cache hits and misses since the embedder was made."""

    hits: int = 0
    misses: int = 0


class CachedEmbedder:
    """An embedder whose vectors are looked up first and stored after they are computed."""

    def __init__(self, embedder: Embedder, path: Path) -> None:
        self.embedder = embedder
        self.model_id = embedder.model_id
        self.dim = embedder.dim
        self.path = path
        self.stats = CacheStats()
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # closed by the workspace that made it, perhaps from another thread than this
            # one (SQLite is built serialized here: sqlite3.threadsafety is 3)
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (model TEXT, text_sha256 TEXT, "
                "vector BLOB, PRIMARY KEY (model, text_sha256)) WITHOUT ROWID"
            )
            with db:
                db.execute("BEGIN IMMEDIATE")  # one process at a time looks, and decides
                if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'owners'").fetchone():
                    db.execute(
                        "CREATE TABLE owners (session TEXT, text_sha256 TEXT, "
                        "PRIMARY KEY (session, text_sha256)) WITHOUT ROWID"
                    )
                    if db.execute("SELECT 1 FROM embeddings LIMIT 1").fetchone():
                        db.execute("CREATE TABLE unowned (since TEXT)")  # made before owners
            self._db = db
        return self._db

    def close(self) -> None:
        """Close the cache's database."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def embed(self, texts: list[str], owners: list[str] | None = None) -> np.ndarray:
        """Vectors of ``texts``, from the cache where it has them (a damaged cache is set
        aside and rebuilt, never fatal); ``owners[i]`` owns ``texts[i]``: the session it was
        read from, or ``src:PATH`` (``discard_owners``)."""
        try:
            return self._embed(texts, owners)
        except (sqlite3.DatabaseError, ValueError) as exc:
            self._raise_if_refused(exc)
            self._set_aside(exc)
        try:
            return self._embed(texts, owners)
        except sqlite3.DatabaseError as exc:
            self._raise_if_refused(exc)
            raise

    def discard(self, text_hashes: set[str]) -> int:
        """Remove the vectors of these texts (by SHA-256, every model) and vacuum the file,
        so no page of it still holds them (forgetting); returns how many were removed. A
        damaged cache, and the copies set aside earlier, cannot be searched: they go whole."""
        if not text_hashes:
            return 0
        return self._discarding(self._discard, text_hashes)

    def _discarding(self, discard: Callable[[Any], int], what: Any) -> int:
        for copy in self.path.parent.glob(f"{self.path.name}*.corrupt-*"):
            copy.unlink(missing_ok=True)  # set aside by ``embed``: vectors of unknown owners
        if not self.path.exists():
            return 0
        try:
            return discard(what)
        except sqlite3.DatabaseError as exc:
            self._raise_if_refused(exc)
            self.close()
            for suffix in ("", "-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            logger.warning("the embedding cache %s was damaged (%s); removed", self.path, exc)
            return 0

    def _discard(self, text_hashes: set[str]) -> int:
        db = self._connect()
        removed = 0
        keys = sorted(text_hashes)
        for start in range(0, len(keys), _LOOKUP_CHUNK):
            chunk = keys[start : start + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            cursor = db.execute(f"DELETE FROM embeddings WHERE text_sha256 IN ({marks})", chunk)
            removed += cursor.rowcount
        db.commit()
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def discard_owners(self, owners: list[str]) -> int:
        """Remove the vectors of every text these ``owners`` own (a text another owner
        shares goes too: it is embedded again when next needed) and vacuum the file; a cache
        holding vectors of unknown owners (made before they were listed) is emptied whole.
        Returns how many vectors were removed. A damaged cache goes whole (``discard``)."""
        if not owners:
            return 0
        return self._discarding(self._discard_owners, owners)

    def _discard_owners(self, owners: list[str]) -> int:
        db = self._connect()
        with db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'unowned'").fetchone():
                removed = db.execute("DELETE FROM embeddings").rowcount
                db.execute("DELETE FROM owners")
                db.execute("DROP TABLE unowned")
            else:
                removed = 0
                for start in range(0, len(owners), _LOOKUP_CHUNK):
                    chunk = owners[start : start + _LOOKUP_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    removed += db.execute(
                        "DELETE FROM embeddings WHERE text_sha256 IN (SELECT text_sha256 FROM "
                        f"owners WHERE session IN ({marks}))",
                        chunk,
                    ).rowcount
                    db.execute(f"DELETE FROM owners WHERE session IN ({marks})", chunk)
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def _raise_if_refused(self, exc: Exception) -> None:
        """A write the machine refused (disk full) is an OSError; the cache itself is sound."""
        if "disk is full" in str(exc) or "disk I/O error" in str(exc):
            self.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path)) from exc

    def _set_aside(self, exc: Exception) -> None:
        self.close()
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            damaged = self.path.with_name(self.path.name + suffix)
            if damaged.exists():
                damaged.rename(damaged.with_name(f"{damaged.name}.corrupt-{stamp}"))
        logger.warning(
            "the embedding cache %s was damaged (%s); set aside and "
            "rebuilt (vectors are embedded again)",
            self.path,
            exc,
        )

    def _embed(self, texts: list[str], owners: list[str] | None) -> np.ndarray:
        import numpy as np

        keys = [text_sha256(t) for t in texts]
        db = self._connect()
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _LOOKUP_CHUNK):
            chunk = unique[start : start + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, blob in db.execute(
                f"SELECT text_sha256, vector FROM embeddings WHERE model = ? "
                f"AND text_sha256 IN ({marks})",
                [self.model_id, *chunk],
            ):
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape != (self.dim,):
                    raise ValueError(
                        f"a cached vector has {vector.size} dimensions, not {self.dim}"
                    )
                # Every embedder returns unit vectors (or zero, for an empty text): a cached
                # one that is not was damaged on disk (SQLite keeps no page checksums).
                norm = float(np.dot(vector, vector))
                if not (abs(norm - 1.0) < 1e-3 or norm == 0.0):
                    raise ValueError(f"a cached vector is damaged (squared norm {norm:.4g})")
                found[key] = vector
        missing = [k for k in unique if k not in found]
        if missing:
            first_text = dict(zip(keys, texts, strict=True))
            vectors = self.embedder.embed([first_text[k] for k in missing])
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                    [
                        (self.model_id, k, v.tobytes())
                        for k, v in zip(missing, vectors, strict=True)
                    ],
                )
            found.update(zip(missing, vectors, strict=True))
        if owners is not None:
            with db:
                db.executemany(
                    "INSERT OR IGNORE INTO owners VALUES (?, ?)",
                    set(zip(owners, keys, strict=True)),
                )
        self.stats.hits += len(keys) - len(missing)
        self.stats.misses += len(missing)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out

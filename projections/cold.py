"""The cold tier: a Lance table of embedded text units, with a full-text and a vector index.

One row per unit (see ``projections.units``): messages, warm summaries and source-document
chunks, with their provenance (session, seq range, event ids, record hashes, ``meta``), text,
content hash and embedding. Invariants:

- Rows are a function of the log plus the pinned embedder: incremental projection equals a
  rebuild, row for row and vector for vector (tested). A document under ``sources/`` is indexed
  when its ``source_indexed`` event is folded, while the file still holds the content the event
  names (``projections.sources``).
- A session's checkpoint is written after its rows are committed. Rows past a checkpoint (a
  crash between the two) are deleted before the session is folded again, so nothing doubles.
- The table carries an ``epoch`` (in its schema metadata) that checkpoints name: a deleted or
  replaced table invalidates every checkpoint, and the tier rebuilds.
- One writer at a time: a catch-up holds ``state/cold.lock``.
- After each catch-up the SHA-256 of every new file of the table is recorded
  (``state/cold.files.json``, see ``projections.table_files``); a deep check (``damage``)
  compares them, so a damaged byte anywhere in the table is named, and ``project`` repairs it.
- lancedb writes the table; what only reads it (a search, the epoch, the row count, whether
  index upkeep is due) opens it with pylance (``projections.cold_read``), whose import costs
  a quarter of lancedb's: a command that finds nothing to write never imports lancedb.
- Lance's failures (its exceptions, and a Rust panic, which pyo3 raises as a ``BaseException``)
  are wrapped here: a write that fails on the table's files is ``ColdDamagedError`` (the runner
  rebuilds the tier), a read that fails finds no table.
- The full-text index is created with the table's first rows and refreshed as rows arrive
  (unindexed rows are searched too, by scan); the ANN index (IVF-PQ, about sqrt(rows)
  partitions) is built once the table has ``ann_min_rows`` rows and retrained each time the
  table quadruples.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import shutil
import unicodedata
import uuid
import warnings
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import orjson

from eventlog.errors import AirsspecError, ColdDamagedError, ColdPathError
from eventlog.overrides import override
from projections.checkpoints import Checkpoint
from projections.embedding_cache import CachedEmbedder, text_sha256
from projections.files import folder_size
from projections.fold import Projector
from projections.policies import IndexPolicy
from projections.sources import read_source
from projections.state_store import FileStateStore
from projections.table_files import TableFiles
from projections.units import (
    UNIT_FIELDS,
    Unit,
    record_units,
    source_units,
    unit_row,
)

if TYPE_CHECKING:  # numpy, pyarrow and the records: imported by the folds, writes and searches
    import numpy as np
    import pyarrow as pa

    from eventlog.schema import Record, SourceIndexedRecord

logger = logging.getLogger(__name__)

TABLE = "units"
_META_KEY = b"airsspec"
INDEX_REFRESH_ROWS = 2000  # rows added since the last index refresh that trigger one
# Fragments (one a catch-up adds) that trigger a compaction too: a search pays for each (a
# flat vector search at 10k rows: 12 ms of CPU in one fragment, 47 ms in a hundred), and a
# table made by one catch-up of an imported history had one a session, whatever its rows.
FRAGMENTS_MAX = 32
VERSIONS_KEPT_FOR = timedelta(hours=1)  # readers on an older version keep their files
LANCE_INDEX_CACHE_BYTES = 128 * 2**20
LANCE_METADATA_CACHE_BYTES = 32 * 2**20


def _lancedb() -> Any:
    """lancedb, imported on first use: it takes seconds to import, and a process that has it
    loaded must not fork (see ``Runner``), so commands that never touch the cold tier skip it.
    Lance's and lancedb's own log lines (WARN when an index file is missing or damaged, which
    the caller already reports as degraded) stay off the terminal unless ``LANCE_LOG`` (or
    ``LANCEDB_LOG``) asks for them."""
    os.environ.setdefault("LANCE_LOG", "error")
    os.environ.setdefault("LANCEDB_LOG", "error")  # lancedb's own logger, as LANCE_LOG
    import lancedb

    return lancedb


_SESSIONS: dict[str, Any] = {}


def lance_session(library: Any) -> Any:
    """The one Lance session of ``library`` (lancedb, which writes the tier, or pylance, which
    reads it) in this process, its caches bounded: Lance's defaults (gigabytes) let a
    long-running daemon's memory grow with every version it commits or reads."""
    session = _SESSIONS.get(library.__name__)
    if session is None:
        session = _SESSIONS[library.__name__] = library.Session(
            index_cache_size_bytes=LANCE_INDEX_CACHE_BYTES,
            metadata_cache_size_bytes=LANCE_METADATA_CACHE_BYTES,
        )
    return session


def _connect(
    directory: Path | str,
    read_consistency: timedelta | None,
    storage_options: dict[str, str] | None = None,
) -> Any:
    """A connection sharing one Lance session whose caches are bounded (``lance_session``).
    ``directory`` is a folder, or a bucket url (``s3://...``) reached with ``storage_options``
    (endpoint, region, keys); Lance commits there with conditional writes, so writers on
    several machines retry instead of overwriting each other's versions."""
    lancedb = _lancedb()
    try:
        return lancedb.connect(
            directory,
            read_consistency_interval=read_consistency,
            session=lance_session(lancedb),
            storage_options=storage_options or None,
        )
    except ValueError as exc:  # a path Lance cannot parse: a control character in a name
        raise ColdPathError(
            f"{str(directory)!r}: the cold tier cannot keep its table under this path "
            f"({_first_line(exc)})"
        ) from exc


def _check_path(directory: Path) -> None:
    """Raise ``ColdPathError`` for a folder Lance would refuse (a name holding a control
    character): a writer checks it when it is made, before any tier writes beside it."""
    if any(unicodedata.category(c) == "Cc" for c in str(directory)):
        raise ColdPathError(
            f"{str(directory)!r}: the cold tier cannot keep its table under a path with a "
            "control character (tab, newline ...); choose another"
        )


def _machine_refused(exc: Exception, path: Path) -> Exception:
    """Lance reports a refused write (disk full, file too large) inside a RuntimeError: as an
    OSError the CLI prints it in one line; any other error is returned as it was."""
    found = re.search(r"\(os error (\d+)\)", str(exc))
    if found is None:
        return exc
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(path))


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def lance_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is Lance failing (to be wrapped): any ``Exception``, or a Rust panic,
    which pyo3 raises as ``PanicException``, a ``BaseException`` (its class exists only once a
    panic happened, so it is known by name). An interrupt or an exit is not."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


@contextmanager
def damage_named(what: str) -> Iterator[None]:
    """Turn a Lance failure inside the block into ``ColdDamagedError`` naming ``what``; an error
    the machine gave (disk full, permissions: an ``OSError`` with an errno) passes as it is."""
    try:
        yield
    except BaseException as exc:
        refused = _machine_refused(exc, Path(what)) if isinstance(exc, Exception) else exc
        if not lance_failed(exc) or isinstance(exc, AirsspecError):
            raise
        # a file gone from the table (ENOENT) is damage; the machine refusing a write is not
        if isinstance(refused, OSError) and refused.errno not in (None, errno.ENOENT):
            raise refused from exc
        raise ColdDamagedError(f"{what}: {_first_line(exc)}") from exc


def quote(value: str) -> str:
    """A SQL string literal for Lance filters."""
    return "'" + value.replace("'", "''") + "'"


def unit_schema(dim: int, metadata: dict[bytes, bytes] | None = None) -> pa.Schema:
    """The Arrow schema of the cold table, derived from ``Unit``: one column per field, then
    the text's SHA-256, what the full-text index reads (``search_text``) and the embedding of
    ``dim`` dimensions."""
    import pyarrow as pa

    arrow_types = {
        "str": pa.string(),
        "UnitKind": pa.string(),
        "int": pa.int64(),
        "tuple[str, ...]": pa.list_(pa.string()),
        "dict[str, Any]": pa.string(),  # canonical JSON
    }
    columns = [(f.name, arrow_types[str(f.type).removesuffix(" | None")]) for f in fields(Unit)]
    return pa.schema(
        [
            *columns,
            ("content_hash", pa.string()),
            ("search_text", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata=metadata,
    )


def search_text(unit: Unit, context: str) -> str:
    """What the full-text index reads for ``unit``: the message before it in its session
    (``context``; a reply such as "Yes, last May" is found by the words of the question it
    answers), then its own text."""
    return f"{context}\n{unit.text}" if context else unit.text


class FtsSettings(TypedDict):
    """What ``lancedb.index.FTS`` is given (besides positions), and the manifest records."""

    base_tokenizer: str
    language: str
    stem: bool
    remove_stop_words: bool
    lower_case: bool
    ascii_folding: bool


# The full-text index: stemmed English words without stop words ("deciding" finds "decided").
FTS_SETTINGS: FtsSettings = {
    "base_tokenizer": "simple",
    "language": "English",
    "stem": True,
    "remove_stop_words": True,
    "lower_case": True,
    "ascii_folding": True,
}


class ColdStore:
    """The Lance table under ``knowledge/vectors/``: open, create, write, index."""

    def __init__(
        self,
        directory: Path | str,
        embedder_id: str,
        dim: int,
        read_consistency: timedelta = timedelta(0),
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """``read_consistency``: how stale a read may be (0: check for new versions at every
        read, as a writer must; readers may allow a little, to skip that check).
        ``directory`` may be a bucket url, reached with ``storage_options``."""
        self.directory = directory
        self.storage_options = storage_options
        self.read_consistency = read_consistency
        self.embedder_id = embedder_id
        self.dim = dim
        self._table: Any = None
        self._epoch: str | None = None

    def open(self) -> Any | None:
        """The table, or None if it is missing, unreadable or made by another embedder. A local
        table whose folder does not exist is missing without asking Lance (importing lancedb
        takes seconds: the first search after an import answers from the log meanwhile)."""
        if self._table is None:
            if self.local is not None and not (self.local / f"{TABLE}.lance").exists():
                return None
            try:
                table = self._connection().open_table(TABLE)
                info = json.loads(table.schema.metadata[_META_KEY])
            except BaseException as exc:  # missing, corrupt: lance raises many kinds, or panics
                if not lance_failed(exc) or isinstance(exc, ColdPathError):
                    raise
                return None
            if info.get("embedder") != self.embedder_id:
                return None
            self._table, self._epoch = table, info["epoch"]
        return self._table

    def dataset(self) -> Any | None:
        """The table opened for reading with pylance at its latest version (a search imports
        no lancedb: ``projections.cold_read``), or None as ``open`` decides."""
        from projections.cold_read import open_dataset

        return open_dataset(self.directory, self.embedder_id, self.storage_options)

    def _connection(self) -> Any:
        return _connect(self.directory, self.read_consistency, self.storage_options)

    @property
    def local(self) -> Path | None:
        """The table's folder, or None when it is on a bucket."""
        return self.directory if isinstance(self.directory, Path) else None

    @property
    def is_open(self) -> bool:
        """Whether the table was opened (or created) by this store."""
        return self._table is not None

    @property
    def epoch(self) -> str | None:
        """The table's epoch (None when there is no table); read with pylance unless this
        store opened the table with lancedb (a writer)."""
        if self._table is None and (dataset := self.dataset()) is not None:
            return str(json.loads(dataset.schema.metadata[_META_KEY])["epoch"])
        return self._epoch if self.open() is not None else None

    def create(self) -> Any:
        """An empty table with a new epoch (whatever was there is removed)."""
        self.remove()
        epoch = uuid.uuid4().hex
        info = {"epoch": epoch, "embedder": self.embedder_id, "dim": self.dim}
        schema = unit_schema(self.dim, {_META_KEY: json.dumps(info).encode()})
        if self.local is not None:
            self.local.mkdir(parents=True, exist_ok=True)
        self._table = self._connection().create_table(TABLE, schema=schema)
        self._epoch = epoch
        return self._table

    @property
    def table_dir(self) -> str:
        """The table's folder (``units.lance``): a path, or a url on a bucket."""
        return f"{str(self.directory).rstrip('/')}/{TABLE}.lance"

    def remove(self) -> None:
        """Delete the table (the tier rebuilds it)."""
        self._table = self._epoch = None
        if self.local is None:
            self._connection().drop_table(TABLE, ignore_missing=True)
        else:
            shutil.rmtree(self.local / f"{TABLE}.lance", ignore_errors=True)

    def delete(self, where: str) -> None:
        """Delete the rows matching a Lance filter. A filter fails when an index file is
        damaged: the indexes are then dropped (``maintain`` builds them again) and it is
        retried; damage beyond the indexes raises ``ColdDamagedError``."""
        table = self.open()
        if table is None:
            return
        try:
            with damage_named(str(self.table_dir)):
                if table.count_rows(where) > 0:
                    table.delete(where)
        except ColdDamagedError as exc:
            self.drop_indexes(str(exc), say=False)
            with damage_named(str(self.table_dir)):
                if table.count_rows(where) > 0:
                    table.delete(where)
            # said only when it helped: otherwise the caller names the damage once
            logger.warning("the cold tier's indexes are rebuilt: %s", exc)

    def drop_indexes(self, why: str, *, say: bool = True) -> None:
        """Drop every index of the table (its rows stay); ``maintain`` makes them again.
        ``say``: warn, naming ``why``."""
        table = self.open()
        if table is None:
            return
        if say:
            logger.warning("the cold tier's indexes are rebuilt: %s", why)
        with damage_named(str(self.table_dir)):
            for index in table.list_indices():
                table.drop_index(index.name)

    def add(self, units: list[Unit], vectors: list[np.ndarray | None], contexts: list[str]) -> None:
        """Append ``units`` with their embeddings (None: full-text only, no vector; vector
        search never returns the row) and the text before each (``search_text``), one row
        each, in one commit."""
        if not units:
            return
        import numpy as np
        import pyarrow as pa

        table = self.open() or self.create()
        rows = [unit_row(u) for u in units]
        columns: dict[str, Any] = {name: [r[name] for r in rows] for name in UNIT_FIELDS}
        columns["content_hash"] = [text_sha256(u.text) for u in units]
        columns["search_text"] = [search_text(u, c) for u, c in zip(units, contexts, strict=True)]
        missing = np.array([v is None for v in vectors])
        zero = np.zeros(self.dim, np.float32)
        flat = np.concatenate([zero if v is None else v for v in vectors]).astype(np.float32)
        columns["vector"] = pa.FixedSizeListArray.from_arrays(
            pa.array(flat, pa.float32()),
            self.dim,
            mask=pa.array(missing) if missing.any() else None,
        )
        with damage_named(str(self.table_dir)):
            table.add(pa.table(columns, schema=table.schema))

    def rows(self) -> int:
        """The table's row count (0 when there is none; read with pylance unless this store
        opened the table with lancedb); ``ColdDamagedError`` when Lance cannot read it."""
        table = self._table if self._table is not None else self.dataset()
        with damage_named(str(self.table_dir)):
            return 0 if table is None else int(table.count_rows())

    def maintain(self, ann_min_rows: int) -> bool:
        """Create missing indexes (the ANN index once the table is big enough, retrained as it
        grows) and compact the table, folding new rows into the indexes, once
        ``INDEX_REFRESH_ROWS`` rows are unindexed or it has ``FRAGMENTS_MAX`` fragments.
        Returns whether old versions' files were cleaned up (the one way the table loses
        files). Whether anything is due is read with pylance first: a table kept up already
        (every catch-up ends here) imports no lancedb."""
        if self._table is None and self._kept_up(ann_min_rows):
            return False
        table = self.open()
        rows = self.rows()
        if rows == 0:
            return False
        with damage_named(str(self.table_dir)):
            return self._maintain(table, rows, ann_min_rows)

    def _kept_up(self, ann_min_rows: int) -> bool:
        """Whether ``maintain`` has nothing to do, read with pylance: every index made, the ANN
        index trained for the table's size, the full-text index fresh enough. False when the
        table cannot be read so (``maintain`` then asks lancedb, which names the damage)."""
        try:
            dataset = self.dataset()
            if dataset is None:
                return False
            rows = int(dataset.count_rows())
            listed = [(i.field_names, i.name) for i in dataset.describe_indices()]
            indexed = {columns[0]: name for columns, name in listed}
            fts = indexed.get("search_text")
            return rows == 0 or (
                all(column in indexed for column in INDEXED_COLUMNS)
                and not _ann_due(rows, ann_min_rows, [n for c, n in listed if c == ["vector"]])
                and fts is not None
                and dataset.stats.index_stats(fts)["num_unindexed_rows"] < INDEX_REFRESH_ROWS
                and len(dataset.get_fragments()) < FRAGMENTS_MAX
            )
        except BaseException as exc:
            if not lance_failed(exc):
                raise
            return False

    def _maintain(self, table: Any, rows: int, ann_min_rows: int) -> bool:
        from lancedb.index import FTS, Bitmap, BTree

        listed = table.list_indices()
        indexed = {i.columns[0]: i.name for i in listed}
        wanted: dict[str, Any] = {
            "search_text": FTS(with_position=False, **FTS_SETTINGS),
            "session": BTree(),
            "kind": Bitmap(),
            "unit_id": BTree(),
            "source": BTree(),
        }
        for column in INDEXED_COLUMNS:
            if column not in indexed:
                table.create_index(column, config=wanted[column])
        current = [i.name for i in listed if i.columns == ["vector"]]
        if _ann_due(rows, ann_min_rows, current):
            self._train_ann(table, rows, current)
        fts = indexed.get("search_text")  # None: made just now, of every row
        lagging = fts is not None and table.index_stats(fts).num_unindexed_rows
        if (lagging or 0) >= INDEX_REFRESH_ROWS or _fragments(table) >= FRAGMENTS_MAX:
            table.optimize(cleanup_older_than=VERSIONS_KEPT_FOR)
            return True
        return False

    def _train_ann(self, table: Any, rows: int, current: list[str]) -> None:
        """(Re)train the IVF-PQ index (``_ann_due``). The new index is committed before the
        old one is dropped, so a query always has one."""
        from lancedb.index import IvfPq

        partitions = ann_partitions(rows)
        name = f"{ANN_PREFIX}{partitions}"
        sub_vectors = next(s for s in (self.dim // 4, self.dim // 8, 1) if s and self.dim % s == 0)
        config = IvfPq(
            distance_type="cosine", num_partitions=partitions, num_sub_vectors=sub_vectors
        )
        table.create_index("vector", config=config, name=name, replace=True)
        for old in current:
            if old != name:
                table.drop_index(old)


# the columns with an index besides the vectors: the full-text one, and those the reader's
# filter (``recall._where``) tests
INDEXED_COLUMNS = ("search_text", "session", "kind", "unit_id", "source")
ANN_PREFIX = "vector_ivf"  # an ANN index is named for its partition count: vector_ivf316
_INDEX_FILES = "_indices/"  # an index's files, which dropping the index leaves unread


def ann_partitions(rows: int) -> int:
    """IVF partitions for a table of ``rows``: about the square root, so a query that visits
    ``recall.NPROBES`` of them reads a shrinking share of a growing table."""
    return max(1, round(rows**0.5))


def _fragments(table: Any) -> int:
    """How many fragments the lancedb ``table`` has."""
    return int(table.stats()["fragment_stats"]["num_fragments"])


def _ann_due(rows: int, ann_min_rows: int, current: list[str]) -> bool:
    """Whether the IVF-PQ index is to be (re)trained: the table has ``ann_min_rows`` rows and
    no index yet (``current``: the vector indexes' names), or four times the rows it was
    trained on (its name holds its partition count): new rows join the nearest of the old
    partitions, which grow until a query visits most of the table."""
    trained = max((_partitions_of(name) for name in current), default=0)
    return rows >= ann_min_rows and (not current or ann_partitions(rows) >= 2 * trained)


def _partitions_of(name: str) -> int:
    """The partition count an ANN index's name holds (0 for one named otherwise: retrain)."""
    digits = name.removeprefix(ANN_PREFIX)
    return int(digits) if name.startswith(ANN_PREFIX) and digits.isdigit() else 0


@dataclass(slots=True)
class ColdState:
    """The cold projector's state of one session: units not yet written, each with the text
    before it (see ``search_text``), and the session's last message text (saved with the
    checkpoint, so a resumed fold gives the next message the same context as a rebuild)."""

    session: str
    base_seq: int  # rows of records after this seq are replaced on save
    previous: str = ""
    units: list[Unit] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)
    # the last registration of each document since the checkpoint: an earlier one's rows would
    # be deleted by the later one's, so only the last is read and indexed
    sources: dict[str, SourceIndexedRecord] = field(default_factory=dict)
    # After this fold's first save, no row is past base_seq (this process wrote them all):
    # later saves skip the delete, a filtered scan that grows with the table.
    clean: bool = False


class ColdProjector(Projector[ColdState]):
    """Per-session checkpoints in ``state/cold/{session}.json``; rows in one shared table."""

    name = "cold"
    parallel = False  # one Lance writer; the embedder already uses every core
    save_every = 256  # embed and commit in steps: memory stays flat, a stop lands within one

    def __init__(
        self,
        out_dir: Path,
        vectors_dir: Path | str,
        sources_dir: Path | None,
        embedder: CachedEmbedder,
        ann_min_rows: int = 20_000,
        policy: IndexPolicy | None = None,
        storage_options: dict[str, str] | None = None,
        lease: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        """``vectors_dir``: the table's folder, or a bucket url reached with
        ``storage_options``; ``lease`` makes ``exclusive`` hold one across machines too (a
        table on a bucket has writers on several)."""
        self.out_dir = out_dir
        self.sources_dir = sources_dir
        self.embedder = embedder
        self.ann_min_rows = ann_min_rows
        self.policy = policy or IndexPolicy()
        if isinstance(vectors_dir, Path):
            _check_path(vectors_dir)
        self.store = ColdStore(
            vectors_dir, embedder.model_id, embedder.dim, storage_options=storage_options
        )
        # state/cold.files.json: beside the checkpoints, as the manifest is (a table on a
        # bucket has no files here to compare)
        local = self.store.local
        table_dir = None if local is None else local / f"{TABLE}.lance"
        self.files = TableFiles(table_dir, out_dir.with_name("cold.files.json"))
        self.state_store: ColdCheckpoints = ColdCheckpoints(out_dir, self, self.files, lease)

    @override
    def purge(self, sessions: Collection[str], *, thorough: bool = True) -> None:
        """Drop ``sessions``' rows and checkpoints; then the table keeps no old version,
        deletion file or index holding them (rebuilding the indexes is most of the cost: not
        ``thorough``, only when it held rows of them)."""
        held = thorough or self.holds(sessions)
        super().purge(sessions)
        if held:
            self.remove_old_versions(reindex=True)

    def holds(self, sessions: Collection[str]) -> bool:
        """Whether the table has rows of ``sessions``."""
        if (table := self.store.open()) is None or not sessions:
            return False
        return table.count_rows(f"session IN ({', '.join(quote(s) for s in sessions)})") > 0

    def remove_old_versions(self, *, reindex: bool) -> None:
        """Remove every old version of the table now, not after ``VERSIONS_KEPT_FOR``: they
        hold rows just deleted (``forget``). A reader still on one fails once and reopens
        (Lance warns of exactly that, on purpose here). With ``reindex``, the indexes are
        dropped and built again first (the full-text index holds the deleted rows' words).
        Lance removing files is recorded in ``cold.files.json`` in the same turn, so the
        deep check (``damage``) never names them as missing. (On a bucket, the lease is
        held as for any write: ``exclusive``.)"""
        table = self.store.open()
        if table is None:
            return
        with self.state_store.exclusive(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
            with damage_named(str(self.store.table_dir)):
                if reindex:
                    for index in table.list_indices():
                        table.drop_index(index.name)
                    table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
                    self.store.maintain(self.ann_min_rows)
                table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
            self.files.record(self.store.epoch, cleaned=True, rows=self.store.rows())

    def epoch(self) -> str | None:
        """The table's epoch: the open table's, else the one recorded with its files while it
        is unchanged since (``TableFiles.current``: a read such as ``status`` imports no
        lancedb), else the table's, opened."""
        if not self.store.is_open:
            recorded = self.files.current()
            if recorded is not None:
                return recorded[0]
        return self.store.epoch

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {
            # 3: documents are indexed from source_indexed events; 4: redacted; 5: a learning's
            # edited text is a unit of its own
            "version": 5,
            "embedder": self.embedder.model_id,
            "epoch": self.epoch(),
            "full_text": FTS_SETTINGS,
            "policy": self.policy.model_dump(include=set(IndexPolicy.model_fields)),
        }

    @override
    def empty(self, session: str) -> ColdState:
        return ColdState(session, 0)

    @override
    def apply(self, state: ColdState, record: Record) -> ColdState:
        from eventlog.schema import SourceIndexedRecord  # loaded by now: the record is one

        if isinstance(record, SourceIndexedRecord):
            state.sources[record.path] = record
            return state
        for unit in record_units(record):
            state.units.append(unit)
            state.contexts.append(state.previous if unit.kind == "message" else "")
            if unit.kind == "message":
                state.previous = unit.text
        return state

    @override
    def item_count(self) -> int:
        """The rows recorded when the tier last committed (``TableFiles.rows``: lancedb is
        not imported), else counted by Lance."""
        recorded = self.files.current()
        if recorded is not None:
            return recorded[1]
        try:
            return self.store.rows()
        except ColdDamagedError:
            return 0  # ``damage`` names it


_KEPT_UP: dict[str, tuple[str, int] | None] = {}
"""Per record of a table's files: the table as this process's last upkeep left it (projectors
are made per catch-up; the process outlives them)."""


class ColdCheckpoints(FileStateStore[ColdState]):
    """The cold tier's store: rows in the shared table (``ColdStore``), then per session its
    checkpoint, ``{out_dir}/{session}.json``; ``files`` records the table's files as written."""

    def __init__(
        self,
        out_dir: Path,
        cold: ColdProjector,
        files: TableFiles,
        lease: Callable[[], AbstractContextManager[Any]] | None,
    ) -> None:
        super().__init__(out_dir, cold)
        self.cold = cold
        self.table = cold.store
        self.files = files
        self.lease = lease
        self._held: Any = None  # the lease while ``exclusive`` holds it
        self._out = str(out_dir)

    @override
    def path(self, session: str) -> Path:
        return self.out_dir / f"{session}.json"

    @override
    def read(self, session: str, raw: bytes) -> tuple[ColdState, Checkpoint] | None:
        try:
            data = orjson.loads(raw)
            fingerprint = data["fingerprint"]
            if fingerprint != self.fold.fingerprint() or fingerprint["epoch"] is None:
                return None
            checkpoint = Checkpoint.from_json(data["checkpoint"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return ColdState(session, checkpoint.seq, data["previous"]), checkpoint

    @override
    def save(self, session: str, state: ColdState, checkpoint: Checkpoint) -> None:
        vectors = self._vectors(state.units)
        self._check_lease()  # after the embedding (it takes a while), right before the writes
        if not state.clean:
            self.table.delete(f"session = {quote(session)} AND record_seq > {state.base_seq}")
        self.table.add(state.units, vectors, state.contexts)
        for event in state.sources.values():  # replayed after a crash: delete first
            text = None
            if event.sha256 is not None and self.cold.sources_dir is not None:
                text = read_source(self.cold.sources_dir, event.path, event.sha256)
            units = [] if text is None else source_units(event, text)
            vectors = self._vectors(units)
            self._check_lease()
            self.table.delete(f"source = {quote(event.path)}")
            if units:
                self.table.add(units, vectors, [""] * len(units))
        if self.table.open() is None:
            self.table.create()  # an empty projection is still an output
        data = {
            "checkpoint": checkpoint.to_json(),
            "fingerprint": self.fold.fingerprint(),
            "previous": state.previous,
        }
        self.write(session, orjson.dumps(data))
        state.base_seq, state.units, state.contexts, state.clean = checkpoint.seq, [], [], True
        state.sources = {}

    def _vectors(self, units: list[Unit]) -> list[np.ndarray | None]:
        """Each unit's vector where the policy embeds it (identical texts once), else None."""
        embedded = [
            (i, text)
            for i, unit in enumerate(units)
            if (text := self.cold.policy.embedded_text(unit)) is not None
        ]
        vectors: list[np.ndarray | None] = [None] * len(units)
        if embedded:
            found = self.cold.embedder.embed(
                [text for _, text in embedded], [units[i].owner for i, _ in embedded]
            )
            for (i, _), vector in zip(embedded, found, strict=True):
                vectors[i] = vector
        return vectors

    def _check_lease(self) -> None:
        """Before each write to a table on a bucket: stop (``LeaseLostError``) once another
        machine has taken the lease over, so two writers never interleave a delete and an add."""
        if self._held is not None:
            self._held.check()

    @override
    def drop(self, session: str) -> None:
        self._check_lease()
        self.table.delete(f"session = {quote(session)}")
        self.path(session).unlink(missing_ok=True)

    @override
    def sessions(self) -> list[str]:
        if not self.out_dir.is_dir():
            return []
        return sorted(p.stem for p in self.out_dir.glob("*.json"))

    @override
    def output_files(self, session: str) -> list[str]:
        # plain strings, as ``SessionFilesStore``'s: every idle catch-up asks each session's
        return [os.path.join(self._out, session + ".json")]

    @override
    def reset(self) -> None:
        for session in self.sessions():  # the table goes whole, so no per-session delete
            self.path(session).unlink()
        self.manifest.remove()
        self.files.remove()
        self.table.remove()

    @override
    def disk_bytes(self) -> int:
        local = self.table.local  # a table on a bucket takes no space here
        return super().disk_bytes() + (0 if local is None else folder_size(local))

    @override
    def damage(self) -> list[str]:
        """Each file of the table that is missing or whose bytes differ from those recorded
        when it was written, named from the workspace down (knowledge/vectors/...)."""
        # Compared with the record first, without opening the table (lancedb takes seconds to
        # import); only what looks damaged is checked against the table's epoch (a table
        # replaced since its files were recorded is not compared).
        damaged = self.files.damaged(None) and self.files.damaged(self.table.epoch)
        table_dir, local = self.files.table_dir, self.table.local  # None on a bucket
        if not damaged or table_dir is None or local is None:
            return []
        shown = table_dir.relative_to(local.parent.parent)
        return [f"{shown / name}: {what}" for name, what in damaged]

    @override
    def repair(self, problems: list[str]) -> bool:
        """Damage in index files only is repaired by dropping the indexes (``finish`` makes
        them again, and the dropped files are no longer compared); other damage rebuilds."""
        damaged = self.files.damaged(self.table.epoch)
        if not damaged or any(not name.startswith(_INDEX_FILES) for name, _ in damaged):
            return False
        self.table.drop_indexes(problems[0])
        self.files.forget(_INDEX_FILES)
        return True

    @override
    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """One writer at a time (``watch`` and ``project`` may both run): a session's delete
        and add must not interleave with another process's."""
        lock = self.out_dir.with_name("cold.lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with lock.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            with self.lease() if self.lease is not None else nullcontext() as held:
                self._held = held
                try:
                    yield
                finally:
                    self._held = None

    @override
    def finish(self) -> None:
        """The table's index upkeep, then its files recorded. Skipped when this process kept
        the table up already and nothing was committed to it since (``TableFiles.current``,
        read without opening the table): an idle catch-up, which every read runs first, then
        costs no Lance round trip. The first upkeep in a process always runs, so a changed
        ``ann_min_rows`` applies at the next command."""
        self._check_lease()
        key = str(self.files.record_path)
        kept = _KEPT_UP.get(key)  # None also for a table on a bucket: always kept up
        recorded = self.files.current()
        if kept is not None and recorded == kept:
            return
        cleaned = self.table.maintain(self.cold.ann_min_rows)
        epoch = self.table.epoch
        # the files are listed again only when the table was committed to (or cleaned) since
        # its record: every commit writes a manifest (at 1M records, listing 15,000 files was
        # half a second of each command's first catch-up)
        if recorded is None or cleaned or self.files.current() != recorded:
            rows = None if epoch is None else self.table.rows()
            self.files.record(epoch, cleaned=cleaned, rows=rows)
        _KEPT_UP[key] = self.files.current()

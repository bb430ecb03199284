"""Rebuild the cold tier on Ray Data: fold, embed and write in parallel, commit once.

The optional engine behind ``airsspec rebuild --tier cold --engine ray`` (the ``[ray]`` extra;
imported only when asked for). The sessions are split into blocks; on workers each session is
read through its workspace's log (never written) and folded by the cold projector into units;
an actor pool embeds them (the model loaded once per actor, the embedding cache consulted first
and filled after); workers write the rows as Lance fragments; the driver commits every fragment
in ONE new version of the table, then writes the checkpoints and the manifest the local rebuild
writes, so ``status`` and later incremental ``project`` runs continue from it. Invariants:

- The rows and vectors equal a local rebuild's (the same projector folds, the same embedder and
  policy embed; tested table against table, sorted by unit id).
- The rows land in exactly one commit; checkpoints are written after it (a crash before leaves
  sessions without checkpoints: the next ``project`` folds them again from an empty table
  epoch, as after any reset).
- Without ``address`` a local Ray is started for the run and stopped after; with one, the
  driver connects to that cluster and disconnects after, leaving it running.
"""

from __future__ import annotations

import logging
import os
import pickle
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from airsspec.errors import CorruptLogError, EngineUnavailableError, UnsafePathError
from eventlog.layout import LOG_SUFFIX
from projections.checkpoints import START, Checkpoint, ManifestEntry, file_identity
from projections.cold import TABLE
from projections.engine import RunReport, SessionOutcome

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from airsspec.workspace import Workspace

logger = logging.getLogger(__name__)

EXTRA = "ray"  # pip install 'airsspec-memory[ray]'
SESSIONS_PER_BLOCK = 64  # a fold task's most sessions: spread over nodes, startup amortised


def _imports() -> tuple[Any, Any]:
    """ray and lance, or one clear error naming the extra."""
    try:
        import lance
        import ray
    except ImportError as exc:
        raise EngineUnavailableError(
            f"--engine ray needs the '{EXTRA}' extra ({exc.name} is not installed): "
            f"pip install 'airsspec-memory[{EXTRA}]'"
        ) from exc
    return ray, lance


def _workspace(where: tuple[str, str | None]) -> Workspace:
    """The workspace on a worker, opened from its root and config (the same settings)."""
    from airsspec.workspace import Workspace

    return Workspace.open(where[0], where[1])


def _fold_block(batch: dict[str, Any], where: tuple[str, str | None]) -> dict[str, list[Any]]:
    """Fold each session of ``batch`` on a worker: its units, contexts and embedded texts
    (pickled), where it ends, the last message text, or why its log could not be read."""
    from projections.sources import read_source
    from projections.units import source_units

    workspace = _workspace(where)
    projector = workspace.projectors(("cold",))[0]
    out: dict[str, list[Any]] = {k: [] for k in ("session", "end", "previous", "failed", "units")}
    for session in batch["session"]:
        state = projector.empty(session)
        end, failed, applied = START, None, 0
        try:
            for located in workspace.log.read(session):
                state = projector.apply(state, located.record)
                end = Checkpoint(located.record.seq, located.record.hash, located.end)
                applied += 1
        except (CorruptLogError, UnsafePathError) as exc:
            failed = str(exc)
        units, contexts = list(state.units), list(state.contexts)
        for event in state.sources.values():  # the last registration of each document
            text = None
            if event.sha256 is not None and projector.sources_dir is not None:
                text = read_source(projector.sources_dir, event.path, event.sha256)
            if text is not None:
                found = source_units(event, text)
                units += found
                contexts += [""] * len(found)
        if failed is not None:
            units, contexts = [], []
        embedded = [projector.policy.embedded_text(u) for u in units]
        out["session"].append(session)
        out["end"].append(pickle.dumps((end, applied)))
        out["previous"].append(state.previous)
        out["failed"].append(failed)
        out["units"].append(pickle.dumps((units, contexts, embedded)))
    return out


class _Embed:
    """An embedding actor: the workspace's cached embedder, loaded once."""

    def __init__(self, where: tuple[str, str | None]) -> None:
        self.embedder = _workspace(where).projectors(("cold",))[0].embedder

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        texts: list[str] = []
        owners: list[str] = []
        per_session = []
        for blob in batch["units"]:
            units, contexts, embedded = pickle.loads(blob)
            wanted = [(i, t) for i, t in enumerate(embedded) if t is not None]
            per_session.append((units, contexts, wanted))
            texts += [t for _, t in wanted]
            owners += [units[i].owner for i, _ in wanted]
        found = self.embedder.embed(texts, owners) if texts else np.zeros((0, self.embedder.dim))
        rows, at = [], 0
        for units, contexts, wanted in per_session:
            vectors: list[np.ndarray | None] = [None] * len(units)
            for i, _ in wanted:
                vectors[i] = np.asarray(found[at], np.float32)
                at += 1
            rows.append(pickle.dumps((units, contexts, vectors)))
        return {"session": batch["session"], "units": rows}


def _write_block(
    batch: dict[str, Any], uri: str, schema: Any, version: str, options: dict[str, str] | None
) -> dict[str, Any]:
    """Write ``batch``'s rows as Lance fragments (not committed); returns them pickled."""
    import lance.fragment

    units, contexts, vectors = [], [], []
    for blob in batch["units"]:
        u, c, v = pickle.loads(blob)
        units += u
        contexts += c
        vectors += v
    if not units:
        return {"fragments": []}
    table = _rows(units, contexts, vectors, schema)
    fragments = lance.fragment.write_fragments(
        table, uri, schema=schema, data_storage_version=version, storage_options=options
    )
    return {"fragments": [pickle.dumps(fragments)]}


def _rows(units: list[Any], contexts: list[str], vectors: list[Any], schema: Any) -> Any:
    """The Arrow rows of ``units`` as ``ColdStore.add`` writes them."""
    import pyarrow as pa

    from projections.cold import search_text
    from projections.embedding_cache import text_sha256
    from projections.units import UNIT_FIELDS, unit_row

    dim = schema.field("vector").type.list_size
    rows = [unit_row(u) for u in units]
    columns: dict[str, Any] = {name: [r[name] for r in rows] for name in UNIT_FIELDS}
    columns["content_hash"] = [text_sha256(u.text) for u in units]
    columns["search_text"] = [search_text(u, c) for u, c in zip(units, contexts, strict=True)]
    missing = np.array([v is None for v in vectors])
    zero = np.zeros(dim, np.float32)
    flat = np.concatenate([zero if v is None else v for v in vectors]).astype(np.float32)
    columns["vector"] = pa.FixedSizeListArray.from_arrays(
        pa.array(flat, pa.float32()), dim, mask=pa.array(missing) if missing.any() else None
    )
    return pa.table(columns, schema=schema)


@contextmanager
def _cluster(ray: Any, address: str | None) -> Iterator[None]:
    """Connect to ``address``, or start a local Ray for the run; disconnect or stop after."""
    if ray.is_initialized():  # the caller's own connection: used as it is, left open
        yield
        return
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    with warnings.catch_warnings():
        # Ray's processes are exec'd, not forked copies of this one: Lance's fork warning is moot
        warnings.filterwarnings("ignore", message="lance is not fork-safe")
        ray.init(address=address, **quiet)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        # Ray Data's plan and progress lines stay off the terminal: the CLI reports the rebuild
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        yield
    finally:
        ray.shutdown()


def rebuild_cold(kernel: Kernel, address: str | None = None, embed_actors: int = 2) -> RunReport:
    """Delete the cold tier and rebuild it from the log on Ray (see the module docstring)."""
    ray, lance = _imports()
    workspace = kernel.workspace
    kernel.register_sources()
    projector = workspace.projectors(("cold",))[0]
    log = workspace.log
    where = (
        str(workspace.root),
        None if workspace.config_path is None else str(workspace.config_path),
    )
    # Ray starts before the table is touched: lancedb's runtime is not to be forked
    with _cluster(ray, address), projector.state_store.exclusive():
        projector.state_store.reset()
        table = projector.store.create()
        # a folder or a bucket url (the store's own options reach it)
        uri = f"{str(projector.store.directory).rstrip('/')}/{TABLE}.lance"
        options = projector.store.storage_options
        base = lance.dataset(uri, storage_options=options)
        sessions = log.sessions()
        log_ids = {s: file_identity(os.path.join(log.log_dir, s + LOG_SUFFIX)) for s in sessions}
        # at least two blocks per CPU, so every node folds; more for many sessions
        cpus = int(ray.cluster_resources().get("CPU", 1))
        blocks = min(max(1, len(sessions)), max(2 * cpus, -(-len(sessions) // SESSIONS_PER_BLOCK)))
        folded = (
            ray.data.from_items([{"session": s} for s in sessions], override_num_blocks=blocks)
            .map_batches(_fold_block, fn_kwargs={"where": where}, batch_size=None)
            .materialize()
        )
        ends = folded.select_columns(["session", "end", "previous", "failed"]).take_all()
        written = (
            folded.map_batches(
                _Embed,
                fn_constructor_kwargs={"where": where},
                compute=ray.data.ActorPoolStrategy(min_size=1, max_size=embed_actors),
                batch_size=8,
                num_cpus=0.5,
            )
            .map_batches(
                _write_block,
                fn_kwargs={
                    "uri": uri,
                    "schema": base.schema,
                    "version": base.data_storage_version,
                    "options": options,
                },
                batch_size=None,
                num_cpus=0.25,
            )
            .take_all()
        )
        fragments = [f for row in written for f in pickle.loads(row["fragments"])]
        if fragments:
            lance.LanceDataset.commit(
                uri,
                lance.LanceOperation.Append(fragments),
                read_version=base.version,
                storage_options=options,
            )
        table.checkout_latest()
        return _checkpoint(projector, ends, log_ids)


def _checkpoint(projector: Any, ends: list[dict[str, Any]], log_ids: dict[str, Any]) -> RunReport:
    """After the commit: each session's checkpoint (through the projector's own ``save``, with
    nothing left to write), the indexes, and the manifest."""
    from projections.cold import ColdState

    outcomes, entries = {}, {}
    for row in ends:
        session = row["session"]
        checkpoint, applied = pickle.loads(row["end"])
        if row["failed"] is not None:
            outcomes[session] = SessionOutcome(session, failed=row["failed"])
            continue
        outcomes[session] = SessionOutcome(session, applied=applied)
        state = ColdState(session, checkpoint.seq, row["previous"], clean=True)
        projector.state_store.save(session, state, checkpoint)
        identity, digest = projector.state_store.output_state(session, digest=True)
        entries[session] = ManifestEntry(checkpoint, identity, log_ids[session], digest)
    projector.state_store.finish()
    projector.state_store.write_manifest(entries)
    return RunReport(projector.name, [outcomes[s] for s in sorted(outcomes)])

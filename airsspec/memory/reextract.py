"""Re-extraction with a diff: what another summarizer or extractor would have made of the log.

The log's primary records (everything but derived events: compactions, extracted learnings and
their marks, and the workspace's own log) are appended again, with their ids, times and meta,
into a fresh workspace in another folder. Where the live log holds a compaction or an
``extracted`` mark, the copy compacts or extracts at that same point, with the summarizer and
extractor asked for: the same algorithm over the same records picks the same ranges, so only
what those parts wrote can differ. The diff
compares summaries (keyed by session and the ids of the first and last record they cover, since
seqs differ between the two logs) and learnings (keyed by session, kind and text) with the live
ones. The live workspace is only read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.config import validated
from airsspec.memory.consolidation import consolidate
from compactor.compactor import CONSOLIDATION
from eventlog.schema import INPUT_TYPES, MEMORY_SESSION, CompactionRecord, LearningRecord

if TYPE_CHECKING:
    from airsspec.kernel import Kernel

_ENVELOPE = ("v", "session", "seq", "prev", "hash", "batch", "redacted")


def _derived(kernel: Kernel) -> tuple[dict[tuple, str], set[tuple]]:
    """Summaries ((session, first id, last id) -> text) and learnings {(session, kind, text)}
    of ``kernel``'s log."""
    log = kernel.log
    summaries: dict[tuple, str] = {}
    learnings: set[tuple] = set()
    for session in log.sessions():
        if session == MEMORY_SESSION:
            continue
        ids: dict[int, str] = {}
        for located in log.read(session):
            record = located.record
            ids[record.seq] = record.id
            if isinstance(record, CompactionRecord):
                key = (session, ids.get(record.from_seq), ids.get(record.to_seq))
                summaries[key] = record.summary
            elif isinstance(record, LearningRecord) and record.source != "user":
                learnings.add((session, record.kind, record.text))
    return summaries, learnings


def reextract(
    kernel: Kernel,
    out: str | Path,
    *,
    summarizer: str | None = None,
    extractor: str | None = None,
) -> dict[str, Any]:
    """Replay ``kernel``'s log into ``out`` with another summarizer and/or extractor; return
    what changed (see the module)."""
    from airsspec.errors import InvalidQueryError, ScopeError
    from airsspec.kernel import Kernel
    from airsspec.workspace import Workspace
    from eventlog.layout import Layout

    if not kernel.gate.admin:
        raise ScopeError(
            f"reextract copies every user's log: only an admin runs it (not {kernel.scope})"
        )

    target, live = Path(out).resolve(), kernel.root.resolve()
    if target == live or live in target.parents or target in live.parents:
        raise InvalidQueryError(f"{target}: choose a folder outside the workspace")
    if target.exists() and any(target.iterdir()):
        raise InvalidQueryError(f"{target}: not empty; choose a new folder")
    settings = validated(kernel.workspace.settings)  # the models: copied with changes below
    if summarizer is not None:
        compactor = settings.compactor.model_copy(update={"summarizer": summarizer})
        settings = settings.model_copy(update={"compactor": compactor})
    if extractor is not None:
        learnings = settings.learnings.model_copy(update={"extractor": extractor})
        settings = settings.model_copy(update={"learnings": learnings})
    # the copy keeps its log and tiers in ``out``: never the live bucket's (``[storage] url``)
    settings = settings.model_copy(update={"storage": type(settings.storage)()})
    Layout(target).create()
    with Workspace(target, settings) as workspace:
        copy = Kernel(workspace)
        source = kernel.log
        for session in source.sessions():
            if session == MEMORY_SESSION:
                continue
            batch: list[dict[str, Any]] = []

            def flush(session: str = session, batch: list[dict[str, Any]] = batch) -> None:
                if batch:
                    copy.log.append_many(session, batch, system=True, keep_secrets=True)
                    batch.clear()

            for located in source.read(session):
                record = located.record
                if isinstance(record, CompactionRecord):  # the same range, summarised again
                    flush()
                    if record.reason == CONSOLIDATION:  # a session end's: all it covered
                        consolidate(copy, session)
                    else:
                        copy.run_policy("compact", session, force=True)
                elif record.type == "extracted":  # the same range, read again
                    flush()
                    copy.run_policy("extract", session, force=True)
                elif record.type in INPUT_TYPES and not (
                    isinstance(record, LearningRecord) and record.source != "user"
                ):
                    body = record.model_dump(exclude_none=True)
                    batch.append({k: v for k, v in body.items() if k not in _ENVELOPE})
            flush()
        before_summaries, before_learnings = _derived(kernel)
        after_summaries, after_learnings = _derived(copy)
    changed = [
        {"session": k[0], "from_id": k[1], "to_id": k[2], "before": v, "after": after_summaries[k]}
        for k, v in before_summaries.items()
        if k in after_summaries and after_summaries[k] != v
    ]

    def listed(keys: Any, texts: dict[tuple, str] | None = None) -> list[dict[str, Any]]:
        if texts is not None:
            return [
                {"session": k[0], "from_id": k[1], "to_id": k[2], "summary": texts[k]}
                for k in sorted(keys, key=str)
            ]
        return [{"session": s, "kind": kind, "text": t} for s, kind, t in sorted(keys)]

    return {
        "out": str(target),
        "summarizer": settings.compactor.summarizer,
        "extractor": settings.learnings.extractor,
        "summaries": {
            "added": listed(after_summaries.keys() - before_summaries.keys(), after_summaries),
            "removed": listed(before_summaries.keys() - after_summaries.keys(), before_summaries),
            "changed": changed,
        },
        "learnings": {
            "added": listed(after_learnings - before_learnings),
            "removed": listed(before_learnings - after_learnings),
        },
    }

"""Token counts per record, for analytics: ``state/tokens/{session}.parquet``.

One row per record (session, seq, hash, type, tokens), tokens counted once with the configured
tiktoken encoding over the record's readable text (the same text the hot tier shows). The
checkpoint is stored in the Parquet file's own metadata, so output and checkpoint are one atomic
write. DuckDB joins these rows to the log's records on (session, seq).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from eventlog.overrides import override
from eventlog.render import record_text
from projections.checkpoints import Checkpoint
from projections.fold import Projector
from projections.state_store import SessionFilesStore, StateStore
from projections.tokens import TokenCounter, token_counter

if TYPE_CHECKING:
    from eventlog.schema import Record

_META_KEY = b"airsspec"


def parquet_schema() -> Any:
    """The files' Arrow schema. pyarrow (with numpy, about a third of a second) is imported
    by the tier's reads and writes of its files only, not by the commands that merely list
    the tiers (``status``)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("session", pa.string()),
            ("seq", pa.int64()),
            ("hash", pa.string()),
            ("type", pa.string()),
            ("tokens", pa.int64()),
        ]
    )


@dataclass(slots=True)
class TokenState:
    """Token counts of one session's records, in order."""

    session: str
    rows: list[tuple[int, str, str, int]] = field(default_factory=list)  # seq, hash, type, n
    pending: list[Record] = field(default_factory=list)


class TokenCountProjector(Projector[TokenState]):
    """Counts every record's tokens once, for analytics."""

    name = "tokens"

    def __init__(self, out_dir: Path, encoding: str) -> None:
        self.encoding = encoding
        self._counter: TokenCounter | None = None
        self.state_store: StateStore[TokenState] = ParquetStore(out_dir, self)

    @override
    def warm_up(self) -> None:
        if self._counter is None:
            self._counter = token_counter(self.encoding)

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {"version": 1, "encoding": self.encoding}

    @override
    def empty(self, session: str) -> TokenState:
        return TokenState(session)

    @override
    def apply(self, state: TokenState, record: Record) -> TokenState:
        state.pending.append(record)
        return state

    def count(self, state: TokenState) -> None:
        """Count the tokens of the records folded since the last save (once each)."""
        self.warm_up()
        assert self._counter is not None
        for record in state.pending:
            state.rows.append(
                (record.seq, record.hash, record.type, self._counter.count(record_text(record)))
            )
        state.pending.clear()


class ParquetStore(SessionFilesStore[TokenState]):
    """``{session}.parquet`` per session, the checkpoint in the file's own metadata."""

    suffix = ".parquet"

    def __init__(self, out_dir: Path, fold: TokenCountProjector) -> None:
        super().__init__(out_dir, fold)
        self.counts = fold

    @override
    def encode(self, state: TokenState, checkpoint: Checkpoint) -> bytes:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.counts.count(state)
        seqs, hashes, types, tokens = zip(*state.rows, strict=True) if state.rows else ([],) * 4
        table = pa.table(
            {
                "session": [state.session] * len(seqs),
                "seq": list(seqs),
                "hash": list(hashes),
                "type": list(types),
                "tokens": list(tokens),
            },
            schema=parquet_schema(),
        )
        meta = {"checkpoint": checkpoint.to_json(), "fingerprint": self.fold.fingerprint()}
        table = table.replace_schema_metadata({_META_KEY: orjson.dumps(meta)})
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        return buffer.getvalue()

    @override
    def decode(self, session: str, data: bytes) -> tuple[TokenState, Checkpoint] | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(pa.BufferReader(data))
        except pa.ArrowException as exc:  # a damaged file: one of ``unreadable``
            raise ValueError(f"{session}: unreadable Parquet: {exc}") from exc
        meta = orjson.loads(table.schema.metadata[_META_KEY])
        if meta["fingerprint"] != self.fold.fingerprint():
            return None
        rows = list(
            zip(
                table["seq"].to_pylist(),
                table["hash"].to_pylist(),
                table["type"].to_pylist(),
                table["tokens"].to_pylist(),
                strict=True,
            )
        )
        return TokenState(session, rows), Checkpoint.from_json(meta["checkpoint"])

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
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from eventlog.render import record_text
from eventlog.schema import Record
from projections.engine import Checkpoint, FilePerSessionProjector
from projections.files import atomic_write
from projections.tokens import TokenCounter, token_counter

SCHEMA = pa.schema(
    [
        ("session", pa.string()),
        ("seq", pa.int64()),
        ("hash", pa.string()),
        ("type", pa.string()),
        ("tokens", pa.int64()),
    ]
)
_META_KEY = b"airsspec"


@dataclass(slots=True)
class TokenState:
    """Token counts of one session's records, in order."""

    session: str
    rows: list[tuple[int, str, str, int]] = field(default_factory=list)  # seq, hash, type, n
    pending: list[Record] = field(default_factory=list)


class TokenCountProjector(FilePerSessionProjector[TokenState]):
    """Counts every record's tokens once, for analytics."""

    name = "tokens"
    suffix = ".parquet"

    def __init__(self, out_dir: Path, encoding: str) -> None:
        super().__init__(out_dir)
        self.encoding = encoding
        self._counter: TokenCounter | None = None

    def warm_up(self) -> None:
        if self._counter is None:
            self._counter = token_counter(self.encoding)

    def fingerprint(self) -> dict[str, Any]:
        return {"version": 1, "encoding": self.encoding}

    def empty(self, session: str) -> TokenState:
        return TokenState(session)

    def apply(self, state: TokenState, record: Record) -> TokenState:
        state.pending.append(record)
        return state

    def save(self, session: str, state: TokenState, checkpoint: Checkpoint) -> None:
        self.warm_up()
        assert self._counter is not None
        for record in state.pending:
            state.rows.append(
                (record.seq, record.hash, record.type, self._counter.count(record_text(record)))
            )
        state.pending.clear()
        seqs, hashes, types, tokens = zip(*state.rows, strict=True) if state.rows else ([],) * 4
        table = pa.table(
            {
                "session": [session] * len(seqs),
                "seq": list(seqs),
                "hash": list(hashes),
                "type": list(types),
                "tokens": list(tokens),
            },
            schema=SCHEMA,
        )
        meta = {"checkpoint": checkpoint.to_json(), "fingerprint": self.fingerprint()}
        table = table.replace_schema_metadata({_META_KEY: orjson.dumps(meta)})
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        atomic_write(self.path(session), buffer.getvalue())

    def load(self, session: str) -> tuple[TokenState, Checkpoint] | None:
        try:
            table = pq.read_table(self.path(session))
            meta = orjson.loads(table.schema.metadata[_META_KEY])
            if meta["fingerprint"] != self.fingerprint():
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
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
            return None

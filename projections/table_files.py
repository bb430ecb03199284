"""The record of a Lance table's files: the SHA-256 of each, taken when it is first seen.

Lance writes each file of a table once (data, deletion, index, transaction and manifest files;
only the latest-version hint is rewritten in place). So a recorded file whose bytes now differ,
or that is gone while still recorded, was damaged after it was written. Invariants:

- A digest is taken once, when its file is first seen, and never updated: a damaged file is
  never recorded as the new truth. A file that is gone is forgotten only after Lance cleaned up
  old versions (the one way it removes files); until then it is named as missing.
- The record names the table's epoch: a table replaced since is not compared (nothing recorded
  of it yet).
- The record is derived, written atomically beside the tier's state; deleted, it is taken again
  from the files as they are.
- It also holds the table's row count at the record: ``status`` reads the epoch and the count
  without opening the table (importing lancedb takes seconds) while no commit has happened
  since (``current``).
- Each file's digest is also kept across processes with the file's size, mtime, inode and
  ctime as they were before it was read (``state/caches/*.verified.json``, ``KeptOnDisk``): a
  file whose four are unchanged is not read again by the next process's check (every write
  changes its ctime, and no call sets one back). At 1M records the table is 6 GB, which every
  ``status`` of a new process read whole. Deleted, the next check reads every file.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from eventlog.layout import read_nofollow
from projections.files import KeptOnDisk, ParsedOnce, atomic_write, kept_digest

# The one file of a table Lance rewrites in place (a hint; the manifests it points to are not).
REWRITTEN = frozenset({"_versions/latest_version_hint.json"})


def sha256_of(path: Path | str) -> str:
    """The SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# ``TableFiles.current``'s answer per record, while the record and the versions folder are
# unchanged, kept once their times are a second old
_CURRENT: ParsedOnce[tuple[str, int] | None] = ParsedOnce(settle_ns=1_000_000_000)

# each file's SHA-256 as last read here, kept while its size, times and inode are unchanged (a
# write changes its ctime) once they are a second old: every catch-up makes its projector, so
# ``current`` is asked afresh by every read (a thousand manifests' bytes: 0.1 s), and a server
# answers every ``status`` with ``damaged`` (every file of the table: 60 ms at 10k records)
_DIGESTS: ParsedOnce[str] = ParsedOnce(settle_ns=1_000_000_000)


def digest_of(path: Path | str, kept: KeptOnDisk[str] | None = None) -> str:
    """The SHA-256 of the file at ``path``, read again only when it was written since: kept in
    this process, and with ``kept`` across processes."""
    read = functools.partial(sha256_of, path)
    return _DIGESTS.get(path, read if kept is None else functools.partial(kept.get, path, read))


class TableFiles:
    """The digests of the files under ``table_dir``, kept in ``record_path``."""

    def __init__(self, table_dir: Path | None, record_path: Path) -> None:
        """``table_dir`` None: the table has no local files (it is on a bucket)."""
        self.table_dir = table_dir
        self.record_path = record_path
        self.verified_path = record_path.parent / "caches" / f"{record_path.stem}.verified.json"

    def _data(self) -> dict[str, Any]:
        try:
            data = orjson.loads(read_nofollow(self.record_path))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def read(self) -> tuple[str | None, dict[str, str]]:
        """(epoch, digest by path under the table's folder) as recorded; (None, {}) if none."""
        try:
            data = self._data()
            return data["epoch"], dict(data["files"])
        except (KeyError, TypeError, ValueError):
            return None, {}

    def _write(self, epoch: str, files: dict[str, str], rows: int | None = None) -> None:
        data = {"epoch": epoch, "files": files, "rows": rows}
        atomic_write(self.record_path, orjson.dumps(data, option=orjson.OPT_SORT_KEYS))

    def record(self, epoch: str | None, *, cleaned: bool, rows: int | None = None) -> None:
        """Record the files the table of ``epoch`` has now (None: there is no table) and its
        ``rows``: a file already recorded keeps its digest, a new one is read. A recorded file
        that is gone is forgotten only when ``cleaned`` (Lance removed old versions' files
        since the last record); otherwise it stays, to be named as missing. An unchanged
        record is not written again."""
        if epoch is None:
            self.remove()
            return
        if self.table_dir is None:
            return
        recorded_epoch, known = self.read()
        recorded_rows = self._data().get("rows")
        known = known if recorded_epoch == epoch else {}
        files: dict[str, str] = {}
        if self.table_dir.is_dir():
            for path in sorted(self.table_dir.rglob("*")):
                name = path.relative_to(self.table_dir).as_posix()
                if name not in REWRITTEN and path.is_file():
                    files[name] = known.get(name) or sha256_of(path)
        if not cleaned:
            files = {**known, **files}
        if (recorded_epoch, known, recorded_rows) != (epoch, files, rows):
            self._write(epoch, files, rows)

    def current(self) -> tuple[str, int] | None:
        """(epoch, rows) as recorded, while the table has not been committed to since: every
        manifest under ``_versions/`` is a recorded one with its recorded bytes (a commit
        writes a new manifest, and the epoch lives in the manifest's schema). None when
        nothing was recorded, the table has no local folder, or it changed since. Read
        without opening the table; remembered by the process while the versions folder and the
        record are unchanged (each catch-up makes its projector, and with it this object:
        comparing 500 manifests is 5-10 ms, twice a context at 100k records)."""
        if self.table_dir is None:
            return None
        versions = self.table_dir / "_versions"
        try:
            return _CURRENT.get(
                self.record_path, lambda: self._unchanged(versions), beside=(versions,)
            )
        except OSError:
            return None

    def _unchanged(self, versions: Path) -> tuple[str, int] | None:
        data = self._data()
        epoch, rows, known = data.get("epoch"), data.get("rows"), data.get("files")
        if not isinstance(epoch, str) or not isinstance(rows, int) or not isinstance(known, dict):
            return None
        try:
            manifests = [n for n in os.listdir(versions) if n.endswith(".manifest")]
        except OSError:
            return None
        kept = self._kept()
        for name in manifests:
            digest = known.get(f"_versions/{name}")
            if digest is None or digest_of(versions / name, kept) != digest:
                return None
        kept.save()
        return (epoch, rows) if manifests else None

    def _kept(self) -> KeptOnDisk[str]:
        """The digests of the table's files kept across processes (see the module)."""
        return KeptOnDisk(self.verified_path, str, kept_digest)

    def damaged(self, epoch: str | None) -> list[tuple[str, str]]:
        """(path under the table's folder, what is wrong) for each recorded file missing or
        changed; ``epoch`` is the table's now (None when it cannot be opened: compared too)."""
        recorded_epoch, known = self.read()
        if not known or epoch not in (None, recorded_epoch) or self.table_dir is None:
            return []
        kept = self._kept()
        found = []
        for name, digest in sorted(known.items()):
            try:  # one ``stat`` a file (a server's every ``status`` asks)
                if digest_of(os.path.join(self.table_dir, name), kept) != digest:
                    found.append((name, "changed after it was written"))
            except OSError:  # gone, or no longer a file
                found.append((name, "missing"))
        kept.save()
        return found

    def forget(self, prefix: str) -> None:
        """Stop comparing the files under ``prefix`` (files the table no longer reads)."""
        epoch, known = self.read()
        if epoch is not None:
            kept = {n: d for n, d in known.items() if not n.startswith(prefix)}
            self._write(epoch, kept, self._data().get("rows"))

    def remove(self) -> None:
        """Delete the record (the table went with it)."""
        self.record_path.unlink(missing_ok=True)
        self.verified_path.unlink(missing_ok=True)

"""``ObjectStore``: the storage protocol over an S3-compatible bucket (through ``obstore``).

Layout under ``s3://bucket/prefix``:

- ``log/{session}/{first_seq:020d}.jsonl``: one immutable object per appended batch, its
  encoded lines exactly as the local log holds them. Zero-padded, so key order is seq order and
  the concatenation in key order is the local log file. Created only if absent
  (``If-None-Match: *``): whoever creates the key of seq N owns seq N; a loser re-reads the
  winner's last record, re-chains (``prev``, ``seq``) and retries.
- ``heads/{session}``: the head (``heads.encode_head``: last acknowledged seq and hash),
  advanced with ``If-Match`` on its ETag, never moved back. It may lag the objects (readers
  list the objects after it), never lead them: objects ending before it mean records were
  removed, which ``verify`` reports.
- ``claims/{casefolded session}``: created once with the session id as body, so two ids that
  differ only in case never both exist (nor collide in a cache on a case-insensitive disk).
- ``seals/{name}``: seals, create-only.
- ``log/{session}/wait-...``: a writer's place in the session's queue after it lost several
  races in a row (``eventlog.storage.turns``); empty, deleted once its batch is stored.

Multi-writer safety rests on the store enforcing the conditions: before the first append,
a probe writes one key twice and checks that the second write is refused; a store that accepts
it is refused (``ConditionalWritesError``) unless the log is configured for one writer.
Every read goes through the node's cache (``cache``): objects are fetched once.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from eventlog.errors import (
    ConditionalWritesError,
    HeadError,
    InvalidSessionIdError,
    SealExistsError,
    SeqTakenError,
    StorageError,
)
from eventlog.heads import Head, decode_head_seq, encode_head
from eventlog.layout import validate_session_id
from eventlog.recovery import TailState
from eventlog.storage import parse_url, turns
from eventlog.storage.cache import Entry, ObjectCache

try:  # the s3 extra: a bucket's one dependency beyond the core
    import obstore
    from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
    from obstore.store import S3Store
except ImportError as exc:
    raise StorageError(
        "a bucket ([storage] url) needs the s3 extra: pip install 'airsspec-memory[s3]'"
    ) from exc

if TYPE_CHECKING:  # obstore's typed dicts exist in its stubs only
    from obstore import ObjectMeta
    from obstore.store import ClientConfig, RetryConfig

_SEQ_DIGITS = 20
_T = TypeVar("_T")
_RETRY: RetryConfig = {"max_retries": 4, "retry_timeout": timedelta(seconds=20)}


def batch_key(session: str, first: int) -> str:
    """The key of the batch whose first record has seq ``first``."""
    return f"log/{session}/{first:0{_SEQ_DIGITS}d}.jsonl"


def _first_of(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    digits = name.removesuffix(".jsonl")
    return int(digits) if len(digits) == _SEQ_DIGITS and digits.isdigit() else None


def _valid(names: Iterable[str]) -> list[str]:
    """The names that are session ids, sorted (a key someone else put there is not one)."""
    valid = []
    for name in names:
        try:
            valid.append(validate_session_id(name))
        except InvalidSessionIdError:
            continue
    return sorted(valid)


class ObjectStore:
    """A ``SessionStore`` over ``s3://bucket/prefix``, caching under ``cache_dir``.

    ``endpoint``, ``region`` and credentials default to the standard AWS variables
    (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``...). ``single_writer`` skips
    the conditional-write probe (one writer cannot race itself).
    """

    def __init__(
        self,
        url: str,
        cache_dir: Path | str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        single_writer: bool = False,
    ) -> None:
        bucket, prefix = parse_url(url)
        self.url = url
        config: dict[str, Any] = {
            k: v
            for k, v in (
                ("endpoint", endpoint),
                ("region", region),
                ("access_key_id", access_key_id),
                ("secret_access_key", secret_access_key),
            )
            if v
        }
        options: ClientConfig | None = (
            {"allow_http": True} if (endpoint or "").startswith("http://") else None
        )
        self._store = S3Store(
            bucket, prefix=prefix or None, client_options=options, retry_config=_RETRY, **config
        )
        self.cache = ObjectCache(Path(cache_dir))
        self.single_writer = single_writer
        self._probed = single_writer
        self._claimed: set[str] = set()
        self._heads: dict[str, tuple[str | None, int]] = {}  # session -> (ETag, seq) last seen
        self._markers: dict[str, list[str]] = {}  # session -> queue markers last listed
        self._mine: dict[str, str] = {}  # session -> this writer's queue marker
        self._losses: dict[str, int] = {}  # session -> races lost in a row

    # ----------------------------------------------------------------- requests

    def _call(self, what: str, key: str, fn: Callable[..., _T], *args: Any, **kw: Any) -> _T:
        """One request; a failure other than the conditions callers handle becomes
        ``StorageError`` naming the url and key."""
        try:
            return fn(self._store, *args, **kw)
        except (AlreadyExistsError, PreconditionError, NotFoundError, FileNotFoundError):
            raise
        except (BaseError, OSError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StorageError(f"{self.url}/{key}: {what} failed: {first}") from exc

    def _get(self, key: str) -> tuple[bytes, str] | None:
        try:
            got = self._call("GET", key, obstore.get, key)
            return bytes(got.bytes()), got.meta["e_tag"] or ""
        except (NotFoundError, FileNotFoundError):
            return None

    def _create(self, key: str, data: bytes) -> str:
        """PUT ``key`` only if absent; its ETag (``AlreadyExistsError`` if present)."""
        return self._call("PUT", key, obstore.put, key, data, mode="create")["e_tag"] or ""

    def _list(self, prefix: str, offset: str | None = None) -> list[ObjectMeta]:
        def listed(store: Any) -> list[ObjectMeta]:  # a listing fails as its pages are read
            return [meta for batch in obstore.list(store, prefix, offset=offset) for meta in batch]

        return self._call("LIST", prefix, listed)

    def probe(self) -> None:
        """Check that the store refuses a second create of one key and a write with a stale
        ETag; ``ConditionalWritesError`` if it does not."""
        key = f"probe/{uuid.uuid4().hex}"
        etag = self._create(key, b"1")
        refused = 0
        try:
            self._create(key, b"2")
        except AlreadyExistsError:
            refused += 1
        try:
            self._call("PUT", key, obstore.put, key, b"3", mode={"e_tag": etag + "x"})
        except PreconditionError:
            refused += 1
        self._call("DELETE", key, obstore.delete, key)
        if refused < 2:
            raise ConditionalWritesError(
                f"{self.url}: the store accepted a conditional write it should have refused "
                "(If-None-Match / If-Match are not enforced), so two writers could take one seq;"
                " use a store that enforces them, or set [storage] single_writer = true"
            )
        self._probed = True

    # ----------------------------------------------------------------- the protocol

    @property
    def local_dir(self) -> Path:
        """The cache folder (the local layout)."""
        return self.cache.folder

    def sync(self, sessions: list[str] | None = None, *, full: bool = False) -> None:
        """Fetch the objects and heads the cache lacks (see ``ObjectCache``)."""
        if sessions is None:
            heads = _valid(m["path"].rsplit("/", 1)[-1] for m in self._list("heads/"))
            sessions = sorted({*self.sessions(), *heads})
        for session in sessions:
            self._sync(session, full=full, head=True)

    def _sync(self, session: str, *, full: bool, head: bool) -> list[Entry]:
        validate_session_id(session)
        prefix = f"log/{session}/"
        with self.cache.locked(session):
            entries = self.cache.entries(session)
            if full:
                metas = self._batches(session, self._list(prefix))
                listed = [(_first_of(m["path"]), m["size"], m["e_tag"]) for m in metas]
                if [(e.first, e.size, e.etag) for e in entries] != listed[: len(entries)]:
                    self.cache.reset(session)
                    entries = []
                metas = metas[len(entries) :]
            else:
                after = batch_key(session, entries[-1].first) if entries else None
                metas = self._batches(session, self._list(prefix, after))
            for meta in metas:
                got = self._get(meta["path"])
                if got is None:  # removed since it was listed
                    break
                data, etag = got
                entry = Entry(_first_of(meta["path"]) or 0, data.count(b"\n"), len(data), etag)
                self.cache.add(session, entry, data)
                entries.append(entry)
            if head:
                got = self._get(f"heads/{session}")
                self.cache.write_head(session, None if got is None else got[0])
        return entries

    def _batches(self, session: str, listed: list[ObjectMeta]) -> list[ObjectMeta]:
        """The batch objects among ``listed``; the queue's markers are kept aside (every
        listing of a session shows them all: their keys sort after every batch's)."""
        names = (m["path"].rsplit("/", 1)[-1] for m in listed)
        self._markers[session] = [n for n in names if n.startswith(turns.PREFIX)]
        return [m for m in listed if _first_of(m["path"]) is not None]

    def tail(self, session: str) -> TailState:
        """The end of the session after fetching the objects past what the cache holds."""
        entries = self._sync(session, full=False, head=False)
        return self.cache.tail(session, entries)

    def append(self, session: str, after: TailState, data: bytes) -> None:
        """Create the object of seq ``after.seq + 1``; ``SeqTakenError`` if it exists (and is
        not this very batch: a retried request whose first attempt did land)."""
        if not self._probed:
            self.probe()
        if after.seq == 0:
            self.claim(session)
        if turns.ahead(self._markers.get(session, []), self._mine.get(session)):
            now = self._wait_turn(session)
            if now.seq != after.seq:
                raise SeqTakenError(f"{self.url}: seq {after.seq + 1} was taken", now)
        key = batch_key(session, after.seq + 1)
        try:
            etag = self._create(key, data)
        except AlreadyExistsError as exc:
            entries = self._sync(session, full=False, head=False)
            mine = [i for i, e in enumerate(entries) if e.first == after.seq + 1]
            if mine and self.cache.read(session, mine[0], entries) == data:
                self._stored(session)
                return
            self._lost(session)
            raise SeqTakenError(
                f"{self.url}/{key}: another writer took seq {after.seq + 1}",
                self.cache.tail(session, entries),
            ) from exc
        with self.cache.locked(session):
            entries = self.cache.entries(session)
            if (entries[-1].last if entries else 0) == after.seq:
                self.cache.add(
                    session, Entry(after.seq + 1, data.count(b"\n"), len(data), etag), data
                )
        self._stored(session)

    # ----------------------------------------------------------------- turns

    def _wait_turn(self, session: str) -> TailState:
        """Poll the session until no live queue marker is ahead of this writer's; its end."""
        deadline = time.monotonic() + 3 * turns.MARKER_TTL_S  # a stuck queue stops nobody
        round_ = 0
        while True:
            time.sleep(turns.backoff(round_))
            round_ += 1
            entries = self._sync(session, full=False, head=False)
            waiting = turns.ahead(self._markers.get(session, []), self._mine.get(session))
            if not waiting or time.monotonic() > deadline:
                return self.cache.tail(session, entries)

    def _lost(self, session: str) -> None:
        """Count a lost race; after several in a row, queue (``turns``), and say so again at
        each race lost while queued (a writer that missed the news appends on)."""
        self._losses[session] = self._losses.get(session, 0) + 1
        if self._losses[session] < turns.LOSSES_BEFORE_QUEUING:
            return
        if session not in self._mine:
            name = turns.marker_name()
            self._create(f"log/{session}/{name}", b"")
            self._mine[session] = name
            self._markers.setdefault(session, []).append(name)
        # the head as it is, naming the marker: other bytes, so another ETag, and every other
        # writer's next head update is refused: it lists the session (and sees the marker)
        # before its next append
        key = f"heads/{session}"
        for _ in range(5):
            got = self._get(key)
            if got is None:
                return
            try:
                head = orjson.loads(got[0])
                data = encode_head(session, head["seq"], head["hash"], self._mine[session])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                return  # an unreadable head: verify names it; nothing to queue behind
            try:
                self._call("PUT", key, obstore.put, key, data, mode={"e_tag": got[1]})
                return
            except PreconditionError:
                continue  # moved meanwhile: the mover's writers are told another way

    def _stored(self, session: str) -> None:
        """A batch of this writer's is stored: leave the queue."""
        self._losses[session] = 0
        name = self._mine.pop(session, None)
        if name is not None:
            # the batch is stored all the same: a marker left behind expires (MARKER_TTL_S)
            with contextlib.suppress(StorageError):
                self._call("DELETE", name, obstore.delete, f"log/{session}/{name}")

    def read_bytes(self, session: str, start: int = 0) -> bytes:
        """The concatenation of the session's objects from byte ``start``."""
        self._sync(session, full=False, head=False)
        try:
            with open(self.cache.folder / f"{session}.jsonl", "rb") as f:
                f.seek(start)
                return f.read()
        except FileNotFoundError:
            return b""

    def sessions(self) -> list[str]:
        """Sessions with objects under ``log/``."""
        listed = self._call("LIST", "log/", obstore.list_with_delimiter, "log/")
        return _valid(p.rstrip("/").rsplit("/", 1)[-1] for p in listed["common_prefixes"])

    def _fetch_head(self, session: str) -> tuple[str | None, int, bytes | None]:
        got = self._get(f"heads/{session}")
        if got is None:
            self._heads[session] = (None, 0)
            return None, 0, None
        raw, etag = got
        seq = decode_head_seq(raw)
        self._heads[session] = (etag, seq)
        return etag, seq, raw

    def head(self, session: str) -> Head | None:
        """The stored head object."""
        _, _, raw = self._fetch_head(session)
        if raw is None or not raw.strip():
            return None
        try:
            data = orjson.loads(raw)
            return Head(data["session"], data["seq"], data["hash"])
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise HeadError(f"{self.url}/heads/{session}: unreadable head ({exc})") from exc

    def set_head(self, session: str, seq: int, digest: str) -> bool:
        """Advance the head object with ``If-Match`` (create it if absent); a writer that
        finds it already at or past ``seq`` leaves it. True when another writer had moved it
        since this store last wrote or read it."""
        key = f"heads/{session}"
        others = False
        for _ in range(50):
            etag, known = self._heads.get(session) or self._fetch_head(session)[:2]
            if known >= seq:
                return True  # another writer's later append is acknowledged past ours
            mode: Any = "create" if etag is None else {"e_tag": etag}
            data = encode_head(session, seq, digest)
            try:
                put = self._call("PUT", key, obstore.put, key, data, mode=mode)
            except (AlreadyExistsError, PreconditionError):
                others = True
                self._fetch_head(session)
                continue
            self._heads[session] = (put["e_tag"], seq)
            return others
        return True

    def claim(self, session: str) -> None:
        """Create ``claims/{casefolded id}``; refuse an id another case already holds."""
        validate_session_id(session)
        if session in self._claimed:
            return
        key = f"claims/{session.casefold()}"
        try:
            self._create(key, session.encode())
        except AlreadyExistsError:
            got = self._get(key)
            holder = got[0].decode() if got is not None else session
            if holder != session:
                raise InvalidSessionIdError(
                    f"invalid session id {session!r}: session {holder!r} exists and differs "
                    "only in case (they would be one file on a case-insensitive file system)"
                ) from None
        self._claimed.add(session)

    def put_seal(self, name: str, data: bytes) -> None:
        """Create ``seals/{name}``."""
        key = f"seals/{validate_session_id(name)}"
        try:
            self._create(key, data)
        except AlreadyExistsError as exc:
            raise SealExistsError(f"{self.url}/{key}: a seal of that name exists") from exc

    def get_seal(self, name: str) -> bytes:
        """The bytes of ``seals/{name}``."""
        got = self._get(f"seals/{validate_session_id(name)}")
        if got is None:
            raise FileNotFoundError(f"{self.url}/seals/{name}")
        return got[0]

    def follower(self, full_every: int = 30) -> Callable[[], None]:
        """One round of following the bucket, to call again and again: one LIST of the heads,
        then the sessions whose head object changed since the last round are brought into
        the cache. Every ``full_every``-th round (the first among them) syncs every session,
        so a batch whose writer died before moving its head shows up too. A failed round
        leaves what it did not finish to the next. Its own store state (the S3 client and
        the cache's file locks are shared safely), so it may run in a thread of its own."""
        twin = copy.copy(self)
        twin._heads, twin._markers, twin._mine, twin._losses = {}, {}, {}, {}
        seen: dict[str, tuple[Any, ...]] = {}  # session -> its head object's ETag and size
        rounds = itertools.count()

        def follow_once() -> None:
            listed = {
                m["path"].rsplit("/", 1)[-1]: (m.get("e_tag"), m["last_modified"], m["size"])
                for m in twin._list("heads/")
            }
            heads = {s: listed[s] for s in _valid(listed)}
            if next(rounds) % full_every == 0:
                twin.sync(sorted({*twin.sessions(), *heads}))
                seen.clear()
            else:
                twin.sync(sorted(s for s, mark in heads.items() if seen.get(s) != mark))
            seen.update(heads)

        return follow_once

    def follow(self, stop: threading.Event, interval_s: float = 1.0) -> threading.Thread:
        """Until ``stop`` is set, run a ``follower`` round every ``interval_s`` in a thread,
        so a watcher of the cache's files (``watch``) sees other machines' appends; a failed
        round is retried at the next."""
        follow_once = self.follower()

        def run() -> None:
            while not stop.wait(interval_s):
                with contextlib.suppress(StorageError):
                    follow_once()

        thread = threading.Thread(target=run, name="bucket-follower", daemon=True)
        thread.start()
        return thread

    def delete_object(self, key: str) -> None:
        """Remove one object (for tests and repairs: the log itself never deletes)."""
        self._call("DELETE", key, obstore.delete, key)

    def close(self) -> None:
        """Nothing is held open between calls."""


def object_store(url: str, cache_root: Path, **options: Any) -> ObjectStore:
    """The ``ObjectStore`` of ``url``, caching under ``cache_root/{digest of url and
    endpoint}`` (one folder per bucket prefix, so a changed url never mixes caches);
    ``options`` go to ``ObjectStore``. ``eventlog.storage.log.ObjectStoreLog`` is its log."""
    import hashlib

    digest = hashlib.sha256(f"{url}\n{options.get('endpoint') or ''}".encode()).hexdigest()
    return ObjectStore(url, cache_root / digest[:16], **options)

"""A workspace: its settings (``airsspec.toml``), its folders, and the parts built from them.

The folders are declared once, by ``eventlog.layout.Layout``; they are the workspace's own: a
symbolic link at any of them is refused when the workspace is opened (``Layout.check``), so
nothing is read or written outside it through one. ``Workspace`` builds the log, the projectors,
the compactor and the rest for the facade (``airsspec.memory.Memory``), which is what callers
use.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from airsspec.config import DEFAULT_PATH, config_of_workspace, load_settings, validated
from airsspec.discovery import CONFIG_NAME, find_config
from airsspec.errors import SettingsError
from eventlog.layout import Layout
from eventlog.log import EventLog
from eventlog.secrets import Redactor

if TYPE_CHECKING:  # each part is imported by the method that makes it: a command pays only
    # for what it uses (lancedb and anthropic take seconds, duckdb and numpy a tenth)
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from airsspec.settings import Settings
    from compactor.compactor import Compactor
    from compactor.extractor import Extractor
    from compactor.summarizers import Summarizer
    from eventlog.crypto import Sealer
    from eventlog.owners import SessionOwners
    from eventlog.storage import SessionStore
    from eventlog.storage.log import ObjectStoreLog
    from projections.analytics import Analytics
    from projections.cold import ColdProjector
    from projections.embedders import Embedder
    from projections.embedding_cache import CachedEmbedder
    from projections.hot import HotWindow
    from projections.recall import Recall
    from projections.tokens import TokenCounter

T = TypeVar("T")

TIERS = ("hot", "warm", "tokens", "learnings", "memory_files", "cold", "visual")


@dataclass
class Workspace:
    """A workspace's settings and folders, and the parts built from them."""

    root: Path
    settings: Settings
    config_path: Path | None = None
    keys: Any = None  # a key store or key callback given to Memory.open (eventlog.keystores)

    def __post_init__(self) -> None:
        self.layout = Layout(self.root)
        self.layout.check()  # once, as the workspace is opened
        # the embedding caches of the cold projectors made here, closed with the workspace
        self._embedding_caches: weakref.WeakSet[CachedEmbedder] = weakref.WeakSet()

    @classmethod
    def open(
        cls,
        root: Path | str | None = None,
        config: Path | str | None = None,
        *,
        cwd: Path | None = None,
    ) -> Workspace:
        """Resolve the config and the root.

        The config is ``config`` if given; else, for an explicit ``root``, the workspace's own
        ``airsspec.toml`` (the nearest one at or above ``root`` whose ``[workspace] path`` names
        ``root``), so a workspace is projected with the same settings wherever the command runs;
        else the nearest ``airsspec.toml`` above ``cwd``. The root is ``root`` if given, else
        ``[workspace] path`` relative to the config file.
        """
        cwd = cwd or Path.cwd()
        if config is not None:
            config_path: Path | None = Path(config)
        elif root is not None:
            config_path = config_of_workspace(Path(root))
        else:
            config_path = find_config(cwd)
        settings = load_settings(config_path)
        if root is None:
            base = config_path.parent if config_path is not None else cwd
            root = base / settings.workspace.path
        return cls(Path(root), settings, config_path)

    @cached_property
    def log(self) -> EventLog | ObjectStoreLog:
        """The workspace's event log (opened once, with its settings): the folder's, or with
        ``[storage] url`` the bucket's, cached under ``state/objects``."""
        secrets = self.settings.secrets
        redactor = Redactor(secrets.patterns) if secrets.redact else None
        storage = self.settings.storage
        if storage.url is not None:
            from eventlog.owners import SessionOwners
            from eventlog.storage.log import ObjectStoreLog
            from eventlog.storage.objects import object_store

            options = storage.model_dump(exclude={"url"})
            store = object_store(storage.url, self.layout.objects_dir, **options)
            # owners are read from the bucket's records, a session fetched before its first
            # sealing here (another machine may have started it)
            owners = SessionOwners(store.local_dir, fetch=lambda session: store.sync([session]))
            return ObjectStoreLog(store, redactor=redactor, sealer=self.sealer(owners))
        return EventLog(
            self.log_dir,
            durability=self.settings.log.durability,
            batch_interval_ms=self.settings.log.batch_interval_ms,
            redactor=redactor,
            sealer=self.sealer(),
        )

    def sealer(self, owners: SessionOwners | None = None) -> Sealer | None:
        """What seals content at append and opens it at read (``[privacy] encrypt``); with
        encryption off, one that only opens, while keys from an earlier setting remain.
        ``owners``: where sessions' owners are read (default: the workspace's log folder)."""
        from eventlog.crypto import Sealer
        from eventlog.keystores import as_key_store, open_key_store
        from eventlog.owners import SessionOwners

        mode, storage = self.settings.privacy.encrypt, self.settings.storage
        if self.keys is not None:
            store, local = as_key_store(self.keys), False
        else:
            bucket = None
            if (url := storage.url) is not None:
                from eventlog.storage.objects import ObjectStore

                options = storage.model_dump(exclude={"url"})
                cache = self.layout.key_cache_dir

                def bucket() -> ObjectStore:
                    return ObjectStore(url, cache, **options)

            store, local = open_key_store(self.settings.privacy.keys, self.layout.keys_dir, bucket)
        if mode == "off" and local and not (self.layout.keys_dir).is_dir():
            return None
        return Sealer(mode, store, owners or SessionOwners(self.log_dir))

    def close(self) -> None:
        """Close the log if it was opened, and the embedding caches' databases."""
        for cache in list(self._embedding_caches):
            cache.close()
        if "log" in self.__dict__:
            self.log.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The folders callers reach through the workspace (each as ``Layout`` declares it).

    @property
    def log_dir(self) -> Path:
        """The frozen logs (``Layout.log_dir``)."""
        return self.layout.log_dir

    @property
    def sources_dir(self) -> Path:
        """Documents the user adds for recall (``Layout.sources_dir``)."""
        return self.layout.sources_dir

    @property
    def state_dir(self) -> Path:
        """Checkpoints, hot windows, caches (``Layout.state_dir``)."""
        return self.layout.state_dir

    def projectors(self, tiers: tuple[str, ...] = TIERS, root: Path | None = None) -> list:
        """The projectors of ``tiers``, writing under ``root`` (default: this workspace)."""
        base = Layout(root) if root is not None else self.layout
        memory = self.settings.memory

        def hot() -> Any:
            from projections.hot import HotProjector

            return HotProjector(
                base.tier_dir("hot"),
                window_size=memory.hot_window_size,
                message_types=memory.message_types,
                encoding=memory.encoding,
                message_cap_tokens=memory.message_cap_tokens,
            )

        def warm() -> Any:
            from projections.warm import WarmProjector

            return WarmProjector(base.tier_dir("warm"), base.library_dir)

        def tokens() -> Any:  # pyarrow: a tenth of a second to import, paid only here
            from projections.token_counts import TokenCountProjector

            return TokenCountProjector(base.tier_dir("tokens"), memory.encoding)

        def learnings() -> Any:
            from projections.learnings import LearningsProjector

            return LearningsProjector(base.tier_dir("learnings"))

        def memory_files() -> Any:
            from projections.memory_files import MemoryFilesProjector

            return MemoryFilesProjector(base.tier_dir("memory_files"))

        def visual() -> Any:  # Pillow: imported only by what renders or reads pages
            from projections.visual import VisualProjector

            return VisualProjector(
                base.tier_dir("visual"), base.visual_dir, self.settings.visual.density
            )

        made: dict[str, Any] = {
            "hot": hot,
            "warm": warm,
            "tokens": tokens,
            "learnings": learnings,
            "memory_files": memory_files,
            "cold": lambda: self._cold_projector(base),
            "visual": visual,
        }
        unknown = [t for t in tiers if t not in made]
        if unknown:
            raise ValueError(f"unknown tier(s) {', '.join(unknown)}; available: {', '.join(made)}")
        projectors = [made[t]() for t in tiers]
        if root is None and self.settings.storage.url is not None:
            for projector in projectors:
                self._share(projector)
        return projectors

    def _share(self, projector: Any) -> None:
        """On a bucket, publish the tier's states there (``projections.bucket_store``), so
        machines resume from the furthest one; the warm tier, whose state names library files
        beside it, keeps its folder."""
        from projections.bucket_store import SHARED_TIERS, BucketStore

        if projector.name in SHARED_TIERS:
            store = self.bucket
            seen = self._published.setdefault(projector.name, {})
            projector.state_store = BucketStore(projector.state_store, store, projector.name, seen)

    @cached_property
    def _published(self) -> dict[str, dict[str, tuple[str | None, int]]]:
        """Per tier, what this process last knew of its published states (``BucketStore``)."""
        return {}

    def load_hot(self, session: str) -> HotWindow | None:
        """The session's hot window as last projected (None if it never was)."""
        from projections.hot import load_hot

        return load_hot(self.layout.tier_dir("hot"), session)

    def _cold_projector(self, base: Layout) -> ColdProjector:
        from projections.cold import ColdProjector
        from projections.embedding_cache import CachedEmbedder

        shared = base == self.layout  # an as-of copy keeps its own table beside it
        # shared by as-of copies: vectors are keyed by content, never by position
        cache = CachedEmbedder(self.embedder(), self.layout.embedding_cache_path)
        self._embedding_caches.add(cache)
        return ColdProjector(
            base.tier_dir("cold"),
            self.cold_location if shared else base.vectors_dir,
            self.layout.sources_dir,
            cache,
            ann_min_rows=self.settings.cold.ann_min_rows,
            policy=validated(self.settings.cold),  # an IndexPolicy, with the section's other keys
            storage_options=self.settings.storage.object_store_options() if shared else None,
            lease=self._bucket_lease("cold") if shared else None,
        )

    def _bucket_lease(self, name: str) -> Callable[[], AbstractContextManager[Any]] | None:
        """With ``[storage] url``: the lease a shared tier's writer holds across machines
        (``eventlog.storage.lease``); else None (the local lock suffices)."""
        if self.settings.storage.url is None:
            return None
        from eventlog.storage.lease import Lease

        return lambda: Lease(self.bucket, name).held()

    @property
    def bucket(self) -> SessionStore | None:
        """With ``[storage] url``: the bucket the log is kept in, which the shared tiers'
        states and leases use too; else None."""
        if self.settings.storage.url is None:
            return None
        from eventlog.storage.log import ObjectStoreLog

        log = self.log
        return log.store if isinstance(log, ObjectStoreLog) else None

    @property
    def cold_location(self) -> Path | str:
        """The cold tier's Lance table: ``{url}/cold`` on the bucket with ``[storage] url``
        (one table every machine reads), else ``knowledge/vectors``."""
        return self.settings.storage.tier_url("cold") or self.layout.vectors_dir

    def embedder(self) -> Embedder:
        """The cold tier's embedder (one shared instance per process and choice)."""
        from projections.embedders import make_embedder

        cold = self.settings.cold
        return make_embedder(cold.embedder, cold.hash_dim)

    def recall(self) -> Recall:
        """``query_memory`` over this workspace's cold tier (read-only; no catch-up)."""
        from projections.cold import ColdStore
        from projections.recall import Recall

        embedder = self.embedder()
        # a long-lived agent sees rows a projector adds within a second
        store = ColdStore(
            self.cold_location,
            embedder.model_id,
            embedder.dim,
            timedelta(seconds=1),
            self.settings.storage.object_store_options(),
        )
        # the [cold] section is a RecallWeights, with the section's other keys
        return Recall(store, embedder, validated(self.settings.cold), self.log)

    def summarizer(self) -> Summarizer:
        """The configured summarizer ("auto": anthropic when a key is set, else extractive)."""
        cfg = self.settings.compactor
        choice = cfg.summarizer
        if choice == "auto":
            choice = "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "extractive"
        if choice == "anthropic":
            from compactor.anthropic_summarizer import AnthropicSummarizer

            return AnthropicSummarizer(
                model=cfg.anthropic_model,
                max_tokens=cfg.anthropic_max_tokens,
                max_retries=cfg.anthropic_max_retries,
                timeout_s=cfg.anthropic_timeout_s,
            )
        from compactor.summarizers import ExtractiveSummarizer

        return ExtractiveSummarizer(self.token_counter())

    def compactor(self, summarizer: Summarizer | None = None) -> Compactor:
        """The compactor of this workspace (its settings, its summarizer unless given)."""
        from compactor.compactor import CompactionSettings, Compactor

        hot, warm = self.projectors(("hot", "warm"))
        memory, cfg = self.settings.memory, self.settings.compactor
        settings = CompactionSettings(
            token_budget=memory.hot_token_budget,
            threshold=memory.compression_threshold,
            chunk_size=memory.chunk_size,
            chunk_summary_tokens=cfg.chunk_summary_tokens,
            summary_tokens=cfg.summary_tokens,
            merge_input_tokens=cfg.merge_input_tokens,
            message_cap_tokens=memory.message_cap_tokens,
        )
        return Compactor(
            self.log,
            hot,
            warm,
            self.layout.locks_dir,
            summarizer or self.summarizer(),
            self.token_counter(),
            settings,
        )

    def extractor(self, choice: str | None = None) -> Extractor:
        """The learnings extractor of this workspace (its configured backend unless given:
        rules, anthropic or auto)."""
        from compactor.extractor import Extractor, default_backend

        cfg, api = self.settings.learnings, self.settings.compactor
        backend = default_backend(
            choice or cfg.extractor,
            model=api.anthropic_model,
            max_tokens=api.anthropic_max_tokens,
            max_retries=api.anthropic_max_retries,
            timeout_s=api.anthropic_timeout_s,
        )
        (learnings,) = self.projectors(("learnings",))
        return Extractor(
            self.log, learnings, self.layout.locks_dir, backend, every=cfg.extract_every
        )

    def analytics(self, parquet_source: str | None = None, sql: str | None = None) -> Analytics:
        """DuckDB views over the log (or exported Parquet), sandboxed for user SQL; with
        ``sql``, only what it reads is loaded. Token counts are brought up to date first."""
        from projections.analytics import Analytics, tables_needed
        from projections.engine import Runner

        tables = tables_needed(sql) if sql is not None else None
        if tables is None or "token_counts" in tables:
            Runner(self.log, self.projectors(("tokens",))).catch_up()  # the one tier SQL reads
        options = self.settings.storage.object_store_options()
        dataset = None
        if parquet_source is None and self.settings.storage.url is not None:
            from projections.delta import delta_dataset

            self.export_delta()  # the shared table, brought up to the log's end
            dataset = delta_dataset(self.analytics_location, options)
        return Analytics(
            self.log.log_dir,  # on a bucket: its synced cache
            self.layout.tier_dir("tokens"),
            parquet_source,
            tables=tables,
            temp_dir=self.layout.duckdb_temp_dir,
            dataset=dataset,
            storage_options=options,
        )

    @property
    def analytics_location(self) -> Path | str:
        """The analytics Delta table: ``{url}/analytics/events`` on the bucket with
        ``[storage] url``, else ``analytics/events`` under the workspace."""
        url = self.settings.storage.tier_url("analytics/events")
        return url or self.layout.analytics_dir

    def export_delta(self) -> int:
        """Append the log's records past the Delta table's positions to it; returns the
        records added."""
        from projections.delta import export_delta

        return export_delta(
            self.log.log_dir,
            self.analytics_location,
            self.settings.storage.object_store_options(),
        )

    def token_counter(self) -> TokenCounter:
        """Counts tokens with the workspace's encoding."""
        from projections.tokens import token_counter

        return token_counter(self.settings.memory.encoding)

    def format_history(self, session: str, budget_tokens: int) -> str:
        """The session's summary, then its newest messages, within ``budget_tokens``."""
        from projections.hot import format_history

        window = self.load_hot(session)
        if window is None:
            return ""
        return format_history(window, budget_tokens, self.token_counter())


def init_workspace(directory: Path) -> tuple[Path, bool]:
    """Create ``directory/airsspec.toml`` (if absent) and the workspace folders.

    Returns the config path and whether it was written (an existing config is never replaced).
    A config written here is trusted by this user for the Claude Code hooks (``airsspec.trust``);
    one found here (a cloned repository's) is not: ``airsspec trust`` says so.
    """
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / CONFIG_NAME
    if config.is_symlink() and not config.exists():  # a repository's link to a missing file
        raise SettingsError(
            f"{config}: a link to {os.readlink(config)}, which does not exist; init writes "
            "no file through it (remove the link, or point it at a config)"
        )
    written = not config.exists()
    # a folder of the workspace a repository committed as a link: refused before anything is made
    path = DEFAULT_PATH if written else load_settings(config).workspace.path
    Layout(directory / path).check()
    if written:
        from airsspec.settings import DEFAULT_TOML

        with open(config, "x", encoding="utf-8") as out:  # made here: never through a link
            out.write(DEFAULT_TOML)
        from airsspec import trust

        with contextlib.suppress(SettingsError):  # a config folder others may write: no trust
            trust.trust(config)
    settings = load_settings(config)
    Layout(directory / settings.workspace.path).create()
    return config, written


class Part(Generic[T]):
    """A part of the open workspace (its root, a folder, its settings...), read through on an
    object that holds the workspace as ``workspace`` (``Kernel``, ``Memory``): declared once
    as ``root = Part(lambda w: w.root, "The workspace folder.")``, typed by what it reads."""

    def __init__(self, get: Callable[[Workspace], T], doc: str) -> None:
        self._get = get
        self.__doc__ = doc

    @overload
    def __get__(self, holder: None, owner: type | None = None) -> Part[T]: ...

    @overload
    def __get__(self, holder: object, owner: type | None = None) -> T: ...

    def __get__(self, holder: Any, owner: type | None = None) -> Part[T] | T:
        if holder is None:  # on the class: the descriptor, for help() and inspect
            return self
        return self._get(holder.workspace)

    def __set__(self, holder: object, value: object) -> None:
        raise AttributeError("read-only: a part of the workspace")

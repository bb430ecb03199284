"""Errors of the compactor, by what the caller can do about them."""

from __future__ import annotations

from eventlog.errors import AirsspecError


class CompactorError(AirsspecError):
    """Root of the compactor's errors."""


class SummarizerError(CompactorError):
    """A summarizer backend failed (network, API error, bad response); the compactor falls back
    to the extractive summarizer and records that it did."""


class CompactionBusyError(CompactorError):
    """Another compactor (or extractor) holds this session's lock."""


class NothingToCompactError(CompactorError):
    """The session has too few uncovered messages to compact."""

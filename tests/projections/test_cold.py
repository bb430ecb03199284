"""The cold tier: incremental equals rebuild (rows and vectors), resume after a crash window,
the embedding cache, source documents, and query filters."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eventlog.log import EventLog
from projections.cold import ColdProjector
from projections.embedders import Embedder, HashEmbedder, make_embedder
from projections.embedding_cache import CachedEmbedder
from projections.engine import Runner
from projections.policies import IndexPolicy, RecallWeights
from projections.recall import Recall
from projections.units import CHUNK_CHARS, split_text
from tests.support.spy import calls

WORDS = [
    *("alpha", "beta", "gamma", "delta", "parser", "deadline"),
    *("webhook", "retry", "login", "timeout", "budget"),
]


def cold(
    root: Path,
    embedder: Embedder | None = None,
    cache: Path | None = None,
    sources: Path | None = None,
    ann_min_rows: int = 20_000,
) -> ColdProjector:
    cached = CachedEmbedder(embedder or HashEmbedder(64), cache or root / "cache.sqlite")
    return ColdProjector(root / "state", root / "vectors", sources, cached, ann_min_rows)


def rows(projector: ColdProjector) -> list[dict]:
    table = projector.store.open()
    assert table is not None
    return table.to_arrow().sort_by("unit_id").to_pylist()


def recall(projector: ColdProjector, log: EventLog | None = None) -> Recall:
    return Recall(projector.store, projector.embedder.embedder, log=log)


text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
long_text = st.integers(1, 3).map(lambda n: " ".join(WORDS) * (n * CHUNK_CHARS // 60))
event_strategy = st.one_of(
    st.builds(lambda c: {"type": "user", "content": c}, text | long_text),
    st.builds(lambda c: {"type": "assistant", "content": c, "meta": {"k": 1}}, text),
    st.builds(lambda t, p: {"type": "action", "tool": t, "params": {"q": p}}, text, text),
    st.builds(lambda r: {"type": "observation", "result": r}, text),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(st.tuples(st.sampled_from(["a", "b"]), event_strategy), min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
)
def test_incremental_equals_rebuild(tmp_path_factory: pytest.TempPathFactory, items, cuts) -> None:
    root = tmp_path_factory.mktemp("cold")
    log = EventLog(root / "log", durability="off")
    bounds = sorted({0, len(items), *(c for c in cuts if c < len(items))})
    for lo, hi in itertools.pairwise(bounds):
        for session, event in items[lo:hi]:
            log.append(session, event)
        Runner(EventLog(root / "log"), [cold(root / "inc")]).catch_up()  # a restart each time
    # the rebuild has its own, empty cache: its vectors are computed afresh
    Runner(EventLog(root / "log"), [cold(root / "full")]).rebuild()
    assert rows(cold(root / "inc")) == rows(cold(root / "full"))
    units = rows(cold(root / "full"))
    assert {(r["session"], r["record_seq"]) for r in units} == {
        (loc.record.session, loc.record.seq) for s in log.sessions() for loc in log.read(s)
    }
    assert all(len(r["text"]) <= CHUNK_CHARS for r in units)


def _varied_log(path: Path, n: int = 40) -> EventLog:
    log = EventLog(path, durability="off")
    for i in range(n):
        words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(3 + (i * 7) % 40))
        log.append(f"s{i % 3}", {"type": "user", "content": f"note {i}: {words}"})
    return log


def test_minilm_incremental_equals_rebuild_without_a_cache(tmp_path: Path) -> None:
    minilm = make_embedder("minilm")
    log = _varied_log(tmp_path / "log", 12)
    Runner(log, [cold(tmp_path / "inc", minilm)]).catch_up()
    for i in range(12, 30):  # in small steps, so batches differ from the rebuild's
        log.append(f"s{i % 3}", {"type": "user", "content": f"later note {i} " * (1 + i % 9)})
        if i % 5 == 0:
            Runner(log, [cold(tmp_path / "inc", minilm)]).catch_up()
    Runner(log, [cold(tmp_path / "inc", minilm)]).catch_up()
    Runner(log, [cold(tmp_path / "full", minilm)]).rebuild()
    assert rows(cold(tmp_path / "inc", minilm)) == rows(cold(tmp_path / "full", minilm))


def test_rebuild_embeds_nothing_it_embedded_before(tmp_path: Path) -> None:
    log = _varied_log(tmp_path / "log")
    first = cold(tmp_path)
    Runner(log, [first]).catch_up()
    assert first.embedder.stats.misses > 0
    again = cold(tmp_path)
    Runner(log, [again]).rebuild()
    assert again.embedder.stats.misses == 0
    assert again.embedder.stats.hits == len(rows(again))


def test_rows_past_a_checkpoint_are_replaced_not_doubled(tmp_path: Path) -> None:
    """The crash window: rows committed, checkpoint not yet written."""
    log = _varied_log(tmp_path / "log", 9)
    Runner(log, [cold(tmp_path / "inc")]).catch_up()
    old_checkpoint = (tmp_path / "inc" / "state" / "s1.json").read_bytes()
    log.append_many("s1", [{"type": "user", "content": f"after {i}"} for i in range(4)])
    Runner(log, [cold(tmp_path / "inc")]).catch_up()
    (tmp_path / "inc" / "state" / "s1.json").write_bytes(old_checkpoint)  # as if killed
    (tmp_path / "inc" / "state.manifest.json").unlink()
    (report,) = Runner(log, [cold(tmp_path / "inc")]).catch_up()
    assert {o.session: o.applied for o in report.outcomes}["s1"] == 4
    Runner(log, [cold(tmp_path / "full")]).rebuild()
    assert rows(cold(tmp_path / "inc")) == rows(cold(tmp_path / "full"))


def test_a_deleted_table_is_rebuilt_exactly(tmp_path: Path) -> None:
    log = _varied_log(tmp_path / "log")
    Runner(log, [cold(tmp_path)]).catch_up()
    before = rows(cold(tmp_path))
    shutil.rmtree(tmp_path / "vectors")
    (report,) = Runner(log, [cold(tmp_path)]).catch_up()
    assert report.applied == 40
    assert rows(cold(tmp_path)) == before


def test_sources_are_indexed_from_their_events(tmp_path: Path) -> None:
    """Adding, changing and removing a document each append one ``source_indexed`` event (path,
    size, SHA-256; null when removed), and the rows follow the events; a rebuild equals the
    incremental tier, and a rebuild as of an earlier point knows only what was registered by
    then."""
    from eventlog.schema import MEMORY_SESSION, SourceIndexedRecord
    from projections.engine import stop_after
    from projections.sources import register_sources

    sources = tmp_path / "sources"
    (sources / "specs").mkdir(parents=True)
    doc = sources / "specs" / "retention.md"
    doc.write_text("# Retention\nKeep audit entries 400 days.\n\n# Export\nCSV in UTC.\n")
    (sources / "image.png").write_bytes(b"\x89PNG")  # not a text document: ignored
    log = _varied_log(tmp_path / "log", 3)
    registry = tmp_path / "registry" / "sources.json"

    def step() -> list[tuple[str, int | None, str | None]]:
        found = register_sources(log, sources, registry)
        Runner(log, [cold(tmp_path, sources=sources)]).catch_up()
        return [(r.path, r.size, r.sha256) for r in found]

    first = step()
    assert first == [("specs/retention.md", doc.stat().st_size, _sha(doc))]
    found = [r for r in rows(cold(tmp_path)) if r["kind"] == "source"]
    assert [(r["source"], r["line_from"], r["line_to"]) for r in found] == [
        ("specs/retention.md", 1, 3),
        ("specs/retention.md", 4, 5),
    ]
    (event,) = [loc.record for loc in log.read(MEMORY_SESSION)]
    assert found[0]["event_ids"] == [event.id] and found[0]["hashes"] == [event.sha256]
    hit = recall(cold(tmp_path)).query_memory("how long are audit entries kept", k=1).hits[0]
    assert (hit.kind, hit.source, hit.line_from) == ("source", "specs/retention.md", 1)
    assert step() == []  # nothing changed: no event

    doc.write_text("# Retention\nKeep audit entries 90 days.\n")
    assert step() == [("specs/retention.md", doc.stat().st_size, _sha(doc))]
    texts = [r["text"] for r in rows(cold(tmp_path)) if r["kind"] == "source"]
    assert texts == ["# Retention\nKeep audit entries 90 days."]
    before = rows(cold(tmp_path))
    Runner(log, [cold(tmp_path, sources=sources)]).rebuild()
    assert rows(cold(tmp_path)) == before  # a rebuild equals the incremental tier

    # as of the first event, the document had other content: not indexed (the log has only its
    # hash); as of the second, it is the file as it is now
    past = tmp_path / "past"
    moments = [loc.record.ts for loc in log.read(MEMORY_SESSION)]
    for moment, expected in ((moments[0], []), (moments[1], texts)):
        projector = ColdProjector(
            past / "state", past / "vectors", sources, cold(tmp_path).embedder, 20_000
        )
        Runner(log, [projector]).rebuild(stop_after(ts=moment))
        assert [r["text"] for r in rows(projector) if r["kind"] == "source"] == expected
        shutil.rmtree(past)

    doc.unlink()
    assert step() == [("specs/retention.md", None, None)]
    assert not [r for r in rows(cold(tmp_path)) if r["kind"] == "source"]
    assert all(isinstance(loc.record, SourceIndexedRecord) for loc in log.read(MEMORY_SESSION))


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_filters_by_session_time_and_kind(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    for day, session in enumerate(["a", "b", "a", "b"], start=1):
        log.append(
            session,
            {"type": "user", "content": "deploy the parser", "ts": f"2026-01-0{day}T12:00:00Z"},
        )
    Runner(log, [cold(tmp_path)]).catch_up()
    memory = recall(cold(tmp_path))
    assert {h.session for h in memory.query_memory("parser", session="a").hits} == {"a"}
    timed = memory.query_memory(
        "parser", since="2026-01-02T00:00:00Z", until="2026-01-03T23:00:00Z"
    )
    assert sorted(h.ts[:10] for h in timed.hits) == ["2026-01-02", "2026-01-03"]
    assert memory.query_memory("parser", kinds=["summary"]).hits == []
    with pytest.raises(ValueError, match="unknown kinds"):
        memory.query_memory("parser", kinds=["nonsense"])


def test_the_ann_index_is_built_once_the_table_is_big_enough(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many(
        "s", [{"type": "user", "content": f"item {i} {WORDS[i % 11]}"} for i in range(300)]
    )
    projector = cold(tmp_path, ann_min_rows=256)
    Runner(log, [projector]).catch_up()
    kinds = {i.columns[0]: i.index_type for i in projector.store.open().list_indices()}
    assert kinds["vector"] == "IvfPq" and kinds["search_text"] == "FTS"
    result = recall(projector).query_memory("item 123", k=3)
    assert result.hits[0].unit_id == "s:124:0" and not result.warnings


def test_the_ann_index_is_retrained_when_the_table_quadruples(tmp_path: Path) -> None:
    """Rows added after training join the old partitions; once the table has four times the
    rows, a new index with about sqrt(rows) partitions replaces it (and only then)."""
    log = EventLog(tmp_path / "log", durability="off")
    projector = cold(tmp_path, ann_min_rows=256)

    def grow_to(count: int) -> list[str]:
        have = log.head("s").seq
        log.append_many(
            "s",
            [{"type": "user", "content": f"item {i} {WORDS[i % 11]}"} for i in range(have, count)],
        )
        Runner(log, [projector]).catch_up()
        table = projector.store.open()
        return [i.name for i in table.list_indices() if i.columns == ["vector"]]

    assert grow_to(300) == ["vector_ivf17"]
    assert grow_to(1000) == ["vector_ivf17"]  # 3.3 times: kept
    assert grow_to(1200) == ["vector_ivf35"]  # 4 times: retrained, the old one dropped
    result = recall(projector).query_memory("item 1123", k=3)
    assert result.hits[0].unit_id == "s:1124:0" and not result.warnings


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=30), max_size=300).map(" ".join),
    st.integers(30, 400),  # no word is longer than a piece
)
@example("a " + "a" * 30, 30)  # found on a fresh clone: a word exactly a piece long
def test_split_text_keeps_every_word_within_the_size(text: str, size: int) -> None:
    pieces = split_text(text, size=size, overlap=size // 5)
    assert all(len(p) <= size for p in pieces)
    assert set(text.split()) <= set(" ".join(pieces).split())
    assert bool(pieces) == bool(text.strip())


def test_the_row_is_declared_once_and_round_trips() -> None:
    from projections.cold import unit_schema
    from projections.recall import Hit
    from projections.units import UNIT_FIELDS, Unit, unit_row, unit_values

    unit = Unit(
        unit_id="s:3:1",
        kind="summary",
        type="chunk",
        text="the text",
        session="s",
        seq_from=1,
        seq_to=3,
        record_seq=4,
        part=1,
        ts="2026-01-01T00:00:00.000000Z",
        event_ids=("e1", "e2"),
        hashes=("h1", "h2"),
        meta={"b": 1, "a": [2]},
        covers={"session": "s", "from_seq": 1, "to_seq": 3},
        source="notes.md",
        line_from=2,
        line_to=9,
    )
    schema = unit_schema(8)
    assert schema.names == [*UNIT_FIELDS, "content_hash", "search_text", "vector"]
    row = unit_row(unit)
    assert row["meta"] == '{"a":[2],"b":1}' and row["event_ids"] == ["e1", "e2"]
    assert Unit(**unit_values(row)) == unit
    hit = Hit(**unit_values(row), score=0.5, parts={"semantic": 0.5})
    assert hit.covers == unit.covers and hit.tier == "cold"


def test_a_reply_is_found_by_the_words_of_the_message_before_it(tmp_path: Path) -> None:
    """The full-text index reads each message with the one before it in its session, stemmed:
    a short answer is found by the question it answers, in other words than its own."""
    log = EventLog(tmp_path / "log", durability="off")
    log.append("a", {"type": "user", "content": "Where should the nightly backups be stored?"})
    log.append("a", {"type": "assistant", "content": "In the eu-west bucket, encrypted."})
    log.append("b", {"type": "assistant", "content": "In the other bucket."})  # no context
    Runner(log, [cold(tmp_path)]).catch_up()
    hits = recall(cold(tmp_path)).query_memory("storing backup", k=5, kinds=["message"]).hits
    lexical = {h.text for h in hits if h.parts["lexical"] > 0}
    assert lexical == {
        "Where should the nightly backups be stored?",
        "In the eu-west bucket, encrypted.",
    }


def test_the_indexing_policy_embeds_a_tool_output_by_its_head_and_finds_the_rest_by_words(
    tmp_path: Path,
) -> None:
    """A long tool output: its first part is embedded from its head, its later parts are only
    full-text indexed (no vector), and full-text search still finds them. A change of policy
    rebuilds the tier."""
    log = EventLog(tmp_path / "log", durability="off")
    body = " ".join(WORDS) * (3 * CHUNK_CHARS // 60) + " zanzibar"
    log.append("a", {"type": "observation", "result": body})
    log.append("a", {"type": "user", "content": "check the parser " * 100})
    Runner(log, [cold(tmp_path)]).catch_up()
    by_part = {(r["type"], r["part"]): r for r in rows(cold(tmp_path))}
    tool_parts = sorted(p for t, p in by_part if t == "observation")
    assert len(tool_parts) >= 3
    assert by_part["observation", 0]["vector"] is not None
    assert all(by_part["observation", p]["vector"] is None for p in tool_parts[1:])
    assert all(r["vector"] is not None for (t, _), r in by_part.items() if t == "user")
    head = HashEmbedder(64).embed([by_part["observation", 0]["text"][:200]])[0]
    assert by_part["observation", 0]["vector"] == pytest.approx(list(head), abs=1e-6)
    found = recall(cold(tmp_path)).query_memory("zanzibar", k=3)
    tail = [h for h in found.hits if h.type == "observation" and h.part == tool_parts[-1]]
    assert tail and tail[0].parts["semantic"] == 0 and tail[0].parts["lexical"] > 0.5
    everything = ColdProjector(
        tmp_path / "state",
        tmp_path / "vectors",
        None,
        CachedEmbedder(HashEmbedder(64), tmp_path / "cache.sqlite"),
        policy=IndexPolicy(tool_embed="all"),
    )
    report = Runner(log, [everything]).catch_up()[0]
    assert report.applied == 2 and all(r["vector"] is not None for r in rows(everything))


def test_a_learning_that_quotes_a_message_does_not_take_a_second_place(tmp_path: Path) -> None:
    """An identity-anchor learning keeps its message verbatim: the two take one place among
    the hits (the message's), while two messages with the same words stay two."""
    from eventlog.schema import MEMORY_SESSION

    log = EventLog(tmp_path / "log", durability="off")
    quoted = "parser deadline webhook retry"
    stored = log.append_many(
        "s",
        [
            {"type": "user", "content": quoted},
            {"type": "assistant", "content": "parser budget alpha"},
            {"type": "user", "content": "webhook login gamma"},
        ],
    )
    anchor = {"session": "s", "seq": 1, "hash": stored[0].hash}
    learning = {"learning_id": "L1", "kind": "anchor", "text": quoted, "scope": "project"}
    log.append_many(
        MEMORY_SESSION,
        [{"type": "learning", **learning, "source": "extractive", "evidence": [anchor]}],
        system=True,
    )
    projector = cold(tmp_path)
    Runner(log, [projector]).catch_up()
    # No relevance floor here: every message takes a place, so a second place is visible.
    unfloored = Recall(projector.store, projector.embedder.embedder, RecallWeights(min_score=0))
    hits = unfloored.query_memory(quoted, k=3).hits
    assert len(hits) == 3
    assert [(h.text, h.kind) for h in hits].count((quoted, "message")) == 1
    assert quoted not in [h.text for h in hits if h.kind == "learning"]
    log.append("s", {"type": "user", "content": quoted})  # said again: a second event
    Runner(log, [projector]).catch_up()
    hits = unfloored.query_memory(quoted, k=4).hits
    assert [h.text for h in hits].count(quoted) == 2
    assert sorted(h.kind for h in hits if h.text == quoted) == ["message", "message"]


def test_the_recorded_epoch_and_row_count_hold_until_the_table_is_committed_to(
    tmp_path: Path,
) -> None:
    """``status`` reads the cold tier's epoch and rows from the record of its files, taken when
    the tier last committed; a later commit (a delete) or a changed manifest makes the record
    stale, and the count is Lance's again."""
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": f"{w} note"} for w in WORDS])
    projector = cold(tmp_path)
    Runner(log, [projector]).catch_up()
    fresh = cold(tmp_path)  # another process: nothing opened yet
    assert fresh.files.current() == (projector.store.epoch, len(WORDS))
    assert fresh.epoch() == projector.store.epoch and not fresh.store.is_open
    assert fresh.item_count() == len(WORDS) and not fresh.store.is_open

    projector.store.delete("record_seq = 1")  # a commit the record did not see
    again = cold(tmp_path)
    assert again.files.current() is None
    assert again.item_count() == len(WORDS) - 1 == len(rows(again))

    Runner(log, [projector]).catch_up()  # folds nothing new; the record is taken again
    manifest = max((tmp_path / "vectors" / "units.lance" / "_versions").glob("*.manifest"))
    assert cold(tmp_path).files.current() is not None
    manifest.write_bytes(manifest.read_bytes() + b"\0")
    assert cold(tmp_path).files.current() is None


def test_an_idle_catch_up_skips_the_index_upkeep_until_the_table_is_committed_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read catches up first: with nothing new, the upkeep this process already ran is not
    run again (no Lance round trip), but a commit since (another process's delete, the next
    fold) brings it back, as does a new process."""
    from projections import cold as cold_module
    from projections.cold import ColdStore

    upkeep = calls(monkeypatch, ColdStore, "maintain")
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": f"{w} note"} for w in WORDS])
    projector = cold(tmp_path)
    runner = Runner(log, [projector])
    runner.catch_up()
    runner.catch_up()
    runner.catch_up()
    assert len(upkeep) == 1

    cold(tmp_path).store.delete("record_seq = 1")  # another process commits
    runner.catch_up()
    assert len(upkeep) == 2
    log.append("s", {"type": "user", "content": "parser retry"})
    runner.catch_up()
    runner.catch_up()
    assert len(upkeep) == 3
    Runner(log, [cold(tmp_path)]).catch_up()  # a new projector in this process: kept up
    assert len(upkeep) == 3
    monkeypatch.setattr(cold_module, "_KEPT_UP", {})  # a new process keeps the table up once
    Runner(log, [cold(tmp_path)]).catch_up()
    assert len(upkeep) == 4


def test_a_table_of_many_fragments_is_compacted_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up of many sessions writes a fragment each; from ``FRAGMENTS_MAX`` of them the
    upkeep compacts the table (a search pays for every fragment), and every search answers as
    on the twin left uncompacted: the same hits, scores and order."""
    from projections import cold as cold_module

    log = EventLog(tmp_path / "log", durability="off")
    for s in range(cold_module.FRAGMENTS_MAX + 4):
        log.append_many(
            f"s{s:02d}",
            [{"type": "user", "content": f"{WORDS[(s + i) % 11]} step {i}"} for i in range(3)],
        )
    most = cold_module.FRAGMENTS_MAX
    compacted = cold(tmp_path / "compacted")
    Runner(log, [compacted]).catch_up()
    monkeypatch.setattr(cold_module, "FRAGMENTS_MAX", 10_000)
    twin = cold(tmp_path / "twin")
    Runner(log, [twin]).catch_up()
    fragments = [len(p.store.dataset().get_fragments()) for p in (compacted, twin)]
    assert fragments[0] < most <= fragments[1] - 4, fragments
    assert rows(compacted) == rows(twin)
    found = 0
    for query in ("webhook retry", "parser step 2", "deadline", "login timeout budget"):
        for filters in ({}, {"session": "s03"}, {"kinds": ["message"]}):
            ours = recall(compacted).query_memory(query, k=8, **filters)
            theirs = recall(twin).query_memory(query, k=8, **filters)
            assert not ours.warnings and not theirs.warnings
            assert [(h.unit_id, h.score) for h in ours.hits] == [
                (h.unit_id, h.score) for h in theirs.hits
            ]
            found += len(ours.hits)
    assert found >= 40  # the searches found something to compare

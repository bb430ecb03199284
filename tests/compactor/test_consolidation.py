"""Session-end consolidation: when a session ends, a compaction event covers what no summary
covers yet, so the next session's ``context`` starts from session 1's rules, requirements and
open tasks, through the Python API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec.memory import Memory
from tests.support.cli import run_cli

SESSION_1 = [
    ("user", "We are building the signup service. Emails must be lowercased before storing."),
    ("assistant", "Understood. I will lowercase emails in the signup handler."),
    ("user", "Always use snake_case for JSON fields."),
    ("assistant", "Noted: snake_case for every JSON field."),
    ("user", "We decided to use Postgres, not SQLite, for the accounts table."),
    ("assistant", "I changed db/config.py to point at Postgres."),
    ("user", "The tests fail with KeyError: 'email' in test_signup.py"),
    ("assistant", "Fixed: the handler now reads payload['email'] after validation."),
    ("user", "Next we still need to add rate limiting to the signup endpoint."),
    ("assistant", "Open task: rate limiting on /signup, not started."),
    ("user", "Also TODO: send the welcome email asynchronously."),
    ("assistant", "Added to the list: welcome email via the job queue."),
    ("user", "Thanks, that's all for today."),
    ("assistant", "Stopping here: rate limiting and the welcome email are open."),
    ("user", "Bye"),
]
CARRIED = (
    "Emails must be lowercased",  # a requirement
    "snake_case for JSON fields",  # a rule
    "rate limiting to the signup endpoint",  # an open task
    "welcome email asynchronously",  # another
)
ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


RULE = "Emails must be lowercased before they are stored."


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def ended(tmp_path: Path, env: None) -> Path:
    """A workspace whose session ``agent-1`` (15 messages, far under the compaction
    threshold) was written through ``Memory`` and not yet ended."""
    with Memory.open(tmp_path, create=True) as memory:
        for who, text in SESSION_1:
            memory.append("agent-1", {"type": who, "content": text})
        assert memory.compact("agent-1") is None  # not due: only the end consolidates
    return tmp_path


def test_the_next_session_starts_from_what_the_last_one_left(ended: Path) -> None:
    with Memory.open(ended) as memory:
        before = memory.context("agent-2", 800)
        assert not all(text in before for text in CARRIED)  # the case at hand
        memory.sessions.end("agent-1")
        compactions = [r for r in memory.replay("agent-1") if r.type == "compaction"]
        assert len(compactions) == 1 and compactions[0].reason == "session ended"
        assert (compactions[0].from_seq, compactions[0].to_seq) == (1, len(SESSION_1))
        context = memory.context("agent-2", 800)
        assert memory.token_counter().count(context) <= 800
        for text in CARRIED:
            assert text in context, text
        memory.sessions.end("agent-1")  # ending again covers nothing new: no second event
        assert sum(r.type == "compaction" for r in memory.replay("agent-1")) == 1


def test_the_cli_carries_it_too(ended: Path) -> None:
    assert run_cli("session", "end", "agent-1", cwd=ended, env=ENV).returncode == 0
    shown = run_cli("context", "agent-2", "--budget", "800", "--json", cwd=ended, env=ENV)
    assert shown.returncode == 0, shown.stderr
    context = json.loads(shown.stdout)["context"]
    for text in CARRIED:
        assert text in context, text


CHANGED = "Emails must be stored exactly as typed, case included."


@pytest.fixture
def changed(ended: Path) -> Path:
    """``ended`` with agent-1 ended, then agent-2 changing its email requirement, ended."""
    with Memory.open(ended) as memory:
        memory.sessions.end("agent-1")
        memory.append("agent-2", {"type": "user", "content": CHANGED})
        memory.sessions.end("agent-2")
    return ended


def test_a_requirement_a_later_session_changed_is_marked_where_an_earlier_summary_quotes_it(
    changed: Path,
) -> None:
    with Memory.open(changed) as memory:
        context = memory.context("agent-3", 1200)
    assert f"requirement: {CHANGED} [agent-2 #1]" in context  # what holds now
    # agent-1's summary still quotes what held then, marked with the record that changed it
    quoted = next(line for line in context.splitlines() if "Emails must be lowercased" in line)
    assert quoted.endswith("(changed later: agent-2 #1)"), quoted


def test_passages_recalled_for_a_query_neither_repeat_the_context_nor_hide_a_change(
    changed: Path,
) -> None:
    with Memory.open(changed) as memory:
        plain = memory.context("agent-3", 2000)
        asked = memory.context("agent-3", 2000, query="how are emails stored?")
        own = memory.context("agent-1", 2000)  # its anchor quotes it verbatim
    said = [line for line in asked.splitlines() if "Emails must be lowercased" in line]
    assert said and all("(changed later: agent-2 #1)" in line for line in said), said
    anchor = next(line for line in own.splitlines() if line.startswith("- [agent-1 #1]"))
    assert anchor.endswith("(changed later: agent-2 #1)"), own
    recalled = [line for line in asked.splitlines() if line.startswith("[recalled from ")]
    assert recalled and asked.startswith(plain)  # passages added, after what was there
    for line in recalled:  # none repeats what the context shows already
        assert line.split("] ", 1)[1].splitlines()[0] not in plain, line


def test_a_learning_a_person_reworded_is_not_said_again_in_the_facts_old_words(
    tmp_path: Path, env: None
) -> None:
    said = "No, never use default exports. Use named exports."
    reworded = "Use named exports only; never export default (the team's lint rule)."
    with Memory.open(tmp_path, create=True) as memory:
        memory.append_many(
            "mon",
            [
                {"type": "user", "content": "Add a users endpoint to the API."},
                {"type": "assistant", "content": "Adding it with a default export."},
                {"type": "user", "content": said},
            ],
        )
        memory.sessions.end("mon")
        before = memory.context("sat", 800).split("\n\n[session ")[0]  # the briefing
        learning = next(a for a in memory.learnings.list().learnings if a.text == said)
        memory.learnings.edit(learning.id, text=reworded, by="lead")
        after = memory.context("sat", 800).split("\n\n[session ")[0]
    assert before.count(said) == 1  # the learning says it (the fact, the same, is left out)
    assert reworded in after and said not in after  # nor is it back in the fact's old words


def test_a_short_passage_whose_words_the_context_holds_elsewhere_is_still_recalled(
    tmp_path: Path, env: None
) -> None:
    """Ben's answer "Postgres" (for the session cache) is not shown by the accounts table's
    decision quoting the word: it is recalled."""
    decided = "We decided to use Postgres, not SQLite, for the accounts table."
    with Memory.open(tmp_path, create=True) as memory:
        memory.append("agent-1", {"type": "user", "content": decided})
        memory.sessions.end("agent-1")
        memory.append("agent-2", {"type": "assistant", "content": "Which database for the cache?"})
        memory.append("agent-2", {"type": "user", "content": "Postgres"})
        asked = memory.context("agent-3", 2000, query="Postgres")
    assert decided in asked  # the words are there, in another passage
    assert "[recalled from agent-2 #2-2] Postgres" in asked.splitlines(), asked


def test_a_quote_holding_another_is_marked_once_and_never_inside_a_word(
    tmp_path: Path, env: None
) -> None:
    with Memory.open(tmp_path, create=True) as memory:
        said = ("Emails must be valid.", "Note: Emails must be valid.", "Indents must be tabs")
        for text in (*said, "Makefile: Indents must be tabsized."):
            memory.append("agent-1", {"type": "user", "content": text})
        memory.sessions.end("agent-1")
        changed = ("Emails must be checked.", "Note: Emails must be checked.")
        for text in (*changed, "Indents must be spaces"):
            memory.append("agent-2", {"type": "user", "content": text})
        memory.sessions.end("agent-2")
        context = memory.context("agent-3", 2000)
    lines = context.splitlines()
    assert "- #1: Emails must be valid. (changed later: agent-2 #1)" in lines, context
    assert "- #2: Note: Emails must be valid. (changed later: agent-2 #2)" in lines, context
    assert "- #3: Indents must be tabs (changed later: agent-2 #3)" in lines, context
    assert "- #4: Makefile: Indents must be tabsized." in lines, context


def test_the_earlier_sessions_stay_within_a_third_of_the_budget_with_their_markers(
    tmp_path: Path, env: None
) -> None:
    with Memory.open(tmp_path, create=True) as memory:
        for session, case in (("agent-1", "lowercase"), ("agent-2", "uppercase")):
            for i in range(6):
                memory.append(session, {"type": "user", "content": f"Field{i} must be {case}."})
            memory.sessions.end(session)
        marked = memory.context("agent-3", 2000)
        assert "- #6: Field5 must be lowercase. (changed later: agent-2 #6)" in marked
        for budget in range(200, 320):
            _, parts = memory.context_parts("agent-3", budget)
            assert parts["earlier"] <= budget // 3, (budget, parts)


def _ended(memory: Memory, session: str, said: str) -> None:
    """``session`` started (task "signup"), told ``said`` by its user, and ended."""
    memory.sessions.start(session, task="signup")
    memory.append(session, {"type": "user", "content": said})
    memory.sessions.end(session)


def test_a_fact_said_again_in_the_same_words_is_not_marked_as_changed_until_one_changes_it(
    tmp_path: Path, env: None
) -> None:
    rule = RULE
    with Memory.open(tmp_path, create=True) as memory:
        _ended(memory, "tue", rule)
        _ended(memory, "wed", rule)  # said again, the same
        again = memory.context("thu", 1500)
        _ended(memory, "fri", "Emails must be stored as typed.")
        changed = memory.context("sat", 1500)
    assert again.count(rule) >= 2 and "changed later" not in again, again
    quotes = [line for line in changed.splitlines() if rule in line]
    assert quotes and all(q.endswith("(changed later: fri #2)") for q in quotes), changed


def test_a_passage_the_shown_history_leaves_out_is_recalled_though_a_longer_one_held_it(
    tmp_path: Path, env: None
) -> None:
    """The answer is in s1's history at the whole budget, but other passages recalled for the
    query leave the history less: it is recalled, not taken for shown and then lost."""
    said = [f"note {i}: the build step number {i} runs the linters first" for i in range(20)]
    said[12] = "note 12: the walrus deploy key lives in the vault"
    rotation = [f"walrus deploy key rotation {i} is on Fridays" for i in range(8)]
    with Memory.open(tmp_path, create=True) as memory:
        memory.append_many("s0", [{"type": "user", "content": text} for text in rotation])
        memory.append_many("s1", [{"type": "user", "content": text} for text in said])
        for budget in range(120, 300, 20):
            context = memory.context("s1", budget, query="walrus deploy key")
            assert "walrus deploy key lives" in context, (budget, context)  # shown or recalled


def test_a_fact_said_again_in_a_message_that_also_says_another_is_not_marked_as_changed(
    tmp_path: Path, env: None
) -> None:
    """The message restating the rule also holds a decision: the fact that changed the rule,
    if any, is the one of its kind and key from that message, not the message's first fact."""
    rule = RULE
    with Memory.open(tmp_path, create=True) as memory:
        _ended(memory, "tue", rule)
        memory.sessions.start("wed", task="signup")
        both = f"We decided to use Postgres for the store. {rule}"
        memory.append("wed", {"type": "user", "content": both})
        memory.sessions.end("wed")
        again = memory.context("thu", 1500)
    assert again.count(rule) >= 2 and "changed later" not in again, again


def test_an_anchor_quoting_a_fact_said_again_in_the_same_words_is_not_marked_as_changed(
    tmp_path: Path, env: None
) -> None:
    rule = RULE
    with Memory.open(tmp_path, create=True) as memory:
        _ended(memory, "tue", f"We are building the signup form. {rule}")
        _ended(memory, "wed", rule)  # said again, the same
        own = memory.context("tue", 1500)
    anchor = next(line for line in own.splitlines() if line.startswith("- [tue #2] "))
    assert anchor.endswith(rule), own  # quoted, and not marked as changed

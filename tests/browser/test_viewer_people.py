"""The viewer's curation and audit pages in real headless Chromium, over hostile content (the
fixture of ``test_viewer_audit``: script tags, unsafe markdown links, raw HTML, a long token):
a learning edited (text and scope) and confirmed through its forms, each change recorded with
the signed-in user as its actor and listed under the learning; the memory files of the signed-in
user with every version and who wrote it (another user's tree is not there); the forget
receipts, an admin's page that never shows what was forgotten. Every new page fits a phone's
width. Each step leaves a screenshot under ``build/screenshots/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import MEMORY_SESSION, Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from airsspec.serve.tokens import TokenStore
from tests.browser.test_viewer import page as page
from tests.browser.test_viewer import shot, sign_in
from tests.browser.test_viewer_audit import HOSTILE, no_script_ran, pytestmark  # noqa: F401
from tests.conftest import OFFLINE, init_encrypted
from tests.support.built import built_once, copy_of

BOB_SECRET = "BOBCANARY the plan bob asked to forget"


def _build(folder: Path) -> None:
    root = init_encrypted(folder / "ws")  # so forget can shred
    with Memory.open(root) as memory:
        alice = memory.scoped(user="alice")
        alice.sessions.start("alpha", task="fix the parser", phase="improve")
        alice.append_many("alpha", [{"type": "user", "content": f"{HOSTILE[0]} fix it"}])
        alice.learnings.add(f"prefer pytest over unittest {HOSTILE[1]}", kind="preference")
        alice.files.create("/memories/notes.md", f"# notes\n{HOSTILE[0]}\n", actor="claude")
        alice.files.str_replace("/memories/notes.md", "# notes", "# parser notes", actor="alice")
        bob = memory.scoped(user="bob")
        bob.append_many("beta", [{"type": "user", "content": BOB_SECRET}])
        bob.files.create("/memories/bob.md", BOB_SECRET, actor="claude")
        receipt = memory.forget(session="beta", by="root")
        assert receipt.records_forgotten >= 1


built = built_once(OFFLINE, _build)


@pytest.fixture
def site(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with Memory.open(copy_of(built, tmp_path, monkeypatch, OFFLINE) / "ws") as memory:
        tokens = TokenStore(memory.root)
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            yield (
                where["url"],
                memory,
                tokens.create("root", admin=True)[1],
                tokens.create("alice")[1],
            )


def edit_form(page, url: str, text: str):
    """The row of the learning that says ``text`` on the learnings page, its edit form open."""
    page.goto(url + "/learnings")
    row = page.locator("tr", has_text=text)
    row.locator("details.edit summary").click()
    return row


def test_a_learning_edited_and_confirmed_through_its_forms_lists_each_change_and_actor(
    site, page
) -> None:
    url, memory, _, alice = site
    sign_in(page, url, alice)
    row = edit_form(page, url, "prefer pytest")
    row.locator("textarea[name=text]").fill(f"prefer pytest -x {HOSTILE[2]}")
    row.locator("select[name=scope]").select_option("session")
    row.locator("details.edit input[name=reason]").fill("sharper, and only here")
    row.locator("button:has-text('Save')").click()
    page.wait_for_selector("table.learnings")
    row = page.locator("tr", has_text="prefer pytest -x")
    row.locator("input[name=reason]").first.fill("agreed")
    row.locator("button:has-text('Confirm')").click()
    page.wait_for_selector("table.learnings")
    row = page.locator("tr", has_text="prefer pytest -x")
    changes = row.locator(".curation li").all_inner_texts()
    assert [c.split(" ")[:3] for c in changes] == [
        ["edited", "by", "alice"],
        ["confirmed", "by", "alice"],
    ]
    assert "scope session" in changes[0] and "sharper" in changes[0]
    assert "session" in row.locator("td").nth(3).inner_text()
    assert row.locator(".text script, .curation script, .curation img").count() == 0
    no_script_ran(page)
    row.scroll_into_view_if_needed()
    shot(page, "20-curated-learning-edited")
    changed = [
        (r.type, r.actor)
        for r in memory.replay(MEMORY_SESSION)
        if r.type in ("learning_edited", "learning_feedback")
    ]
    assert changed == [("learning_edited", "alice"), ("learning_feedback", "alice")]
    edit = next(r for r in memory.replay(MEMORY_SESSION) if r.type == "learning_edited")
    assert (edit.text, edit.scope) == (f"prefer pytest -x {HOSTILE[2]}", "session")


def test_an_edit_that_changes_nothing_or_makes_a_learning_global_is_refused_on_the_page(
    site, page
) -> None:
    url, memory, _, alice = site
    sign_in(page, url, alice)
    before = len(list(memory.replay(MEMORY_SESSION)))
    row = edit_form(page, url, "prefer pytest")
    row.locator("button:has-text('Save')").click()  # the text and scope as they are
    assert "already reads so" in page.inner_text("main")
    row = edit_form(page, url, "prefer pytest")
    row.locator("select[name=scope]").select_option("global")
    row.locator("button:has-text('Save')").click()
    assert "only an admin" in page.inner_text("main")
    assert len(list(memory.replay(MEMORY_SESSION))) == before


def test_memory_files_show_the_users_own_tree_with_every_version_and_its_actor(site, page) -> None:
    url, _, _, alice = site
    sign_in(page, url, alice)
    page.goto(url + "/memories")
    listed = page.locator("table.memories tbody td:first-child a").all_inner_texts()
    assert listed == ["/memories/notes.md"]  # bob's tree is not alice's
    assert "BOBCANARY" not in page.content()
    shot(page, "21-memory-files")
    page.click("table.memories a:has-text('notes.md')")
    page.wait_for_selector("ol.versions")
    versions = page.locator("ol.versions li .meta").all_inner_texts()
    assert [v.split(" by ")[1].split(" ")[0] for v in versions] == ["alice", "claude"]
    assert versions[0].startswith("edited") and versions[1].startswith("created")
    assert HOSTILE[0] in page.locator("ol.versions li pre").first.inner_text()  # as text
    no_script_ran(page)
    shot(page, "22-memory-file-versions")
    theirs = page.request.get(url + "/memories/file?path=/memories/bob.md")
    assert theirs.status == 404 and "BOBCANARY" not in theirs.text()


def test_forget_receipts_name_whom_and_who_asked_never_what_and_only_to_an_admin(
    site, page
) -> None:
    url, _, admin, alice = site
    sign_in(page, url, admin)
    page.goto(url + "/forgotten")
    rows = page.locator("table.receipts tbody tr")
    assert rows.count() == 1
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[0] == "session beta" and cells[2] == "root"
    assert int(cells[3]) == 1 and int(cells[4]) >= 1
    assert "BOBCANARY" not in page.content()
    shot(page, "23-forget-receipts")
    page.click("button:has-text('Sign out')")
    sign_in(page, url, alice)
    page.goto(url + "/forgotten")
    assert page.locator("table.receipts tbody td.empty").count() == 1
    assert "beta" not in page.inner_text("table.receipts")


def test_the_new_pages_fit_a_phone(site, page) -> None:
    url, _, admin, _ = site
    sign_in(page, url, admin)
    page.set_viewport_size({"width": 375, "height": 800})
    for path in ("/learnings", "/memories", "/memories/file?path=/memories/team.md", "/forgotten"):
        page.goto(url + path)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 375, f"{path} is {wide}px wide at phone width"
    assert page.locator("header nav a.here").inner_text() == "Forgotten"


@pytest.fixture
def facts_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Alice requires one thing in a session and its opposite in the next (hostile text in the
    first); bob requires something of his own. Each session's end records its facts."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    root = init_encrypted(tmp_path / "ws")
    said = [
        ("alice", "one", f"Emails must be lowercased {HOSTILE[0]}"),
        ("alice", "two", "Emails must be uppercased from now on"),
        ("bob", "three", f"Passwords must be rotated {BOB_SECRET}"),
    ]
    with Memory.open(root) as memory:
        for user, session, text in said:
            scoped = memory.scoped(user=user)
            scoped.sessions.start(session, task="rules")
            scoped.append_many(session, [{"type": "user", "content": text}])
            scoped.sessions.end(session)
        tokens = TokenStore(memory.root)
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            yield where["url"], tokens.create("alice")[1]


def test_facts_show_what_holds_what_it_replaced_and_the_records_it_came_from(
    facts_site, page
) -> None:
    url, alice = facts_site
    sign_in(page, url, alice)
    page.goto(url + "/facts")
    rows = page.locator("table.facts tbody tr")
    assert rows.count() == 1  # the current requirement; bob's is not alice's
    assert "uppercased" in rows.first.inner_text() and "BOBCANARY" not in page.content()
    page.check("input[name=history]")
    page.click("button:has-text('Show')")
    page.wait_for_selector("table.facts tr.superseded")
    old = page.locator("table.facts tr.superseded")
    assert old.count() == 1 and HOSTILE[0] in old.inner_text()  # shown as text
    no_script_ran(page)
    shot(page, "24-facts-history")
    old.locator("a", has_text="two #").first.click()
    page.wait_for_selector("li.ev:target")
    assert "uppercased" in page.locator("li.ev:target").inner_text()
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(url + "/facts?history=1")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    assert page.locator("header nav a.here").inner_text() == "Facts"

"""The viewer in a real browser (Playwright driving Chromium): sign in, filter the sessions,
open one, follow a summary's link to exactly the records it covers, search and follow a hit's
provenance; stored content that holds a ``<script>`` is shown as text and never runs. Each step
leaves a screenshot under ``build/screenshots/``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from airsspec.memory import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from airsspec.serve.tokens import TokenStore
from tests.conftest import REPO

CHROMIUM = "/usr/bin/chromium"
SHOTS = REPO / "build" / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
INJECTED = "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned = 2'>"

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None,
        reason=f"no Chromium at {CHROMIUM} (make test installs it with apt when run as root)",
    ),
]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("AIRSSPEC_MEMORY_HOT_TOKEN_BUDGET", "300")
    with Memory.open(tmp_path, create=True) as memory:
        events = []
        for i in range(1, 13):
            events.append({"type": "user", "content": f"step {i}: tune the parser for case {i}"})
            events.append({"type": "assistant", "content": f"done with case {i} in parser.py"})
        events += [
            {"type": "thought", "content": "the upload limit needs a token bucket"},
            {"type": "action", "id": "call-1", "tool": "bash", "params": {"cmd": "pytest"}},
            {"type": "observation", "action_id": "call-1", "result": "2 failed", "is_error": True},
        ]
        alice, bob = owned(memory, "alice"), owned(memory, "bob")
        alice.append_many("alpha", events)
        assert alice.compact("alpha", force=True) is not None
        bob.append_many("beta", [{"type": "user", "content": INJECTED}])
        memory.project(("cold",))
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            yield where["url"], served.local_token, TokenStore(memory.root).create("alice")[1]


def owned(memory: Memory, user: str) -> Memory:
    """``memory`` as ``user`` writes it (sessions owned by them)."""
    return memory.scoped(user=user)


@pytest.fixture
def page():
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": 1200, "height": 900})
        finally:
            browser.close()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(page, url: str, token: str) -> None:
    """Sign in with the viewer's own form (the only way: a token in a url never is)."""
    page.goto(url + "/login")
    page.fill("input[name=token]", token)
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("table.sessions")


def test_sign_in_filter_open_follow_a_summary_and_search(site, page) -> None:
    url, token, _ = site  # the owner's token: every session
    page.goto(url + "/")
    assert page.url.endswith("/login")  # no cookie yet
    page.fill("input[name=token]", "not-a-token")
    page.click("button:has-text('Sign in')")
    assert "not valid" in page.inner_text("[role=alert]")
    page.fill("input[name=token]", token)
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("table.sessions")
    assert page.locator("table.sessions tbody tr").count() == 2
    shot(page, "01-sessions")

    page.fill("input[name=text]", "beta")
    page.click("button:has-text('Filter')")
    page.wait_for_url(re.compile(r"text=beta"))
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 1 and rows.first.inner_text().startswith("beta")
    shot(page, "02-filtered")
    page.goto(url + "/?user=alice")  # sessions know their owner
    assert page.locator("table.sessions tbody tr").count() == 1
    assert page.locator("table.sessions tbody tr").first.inner_text().startswith("alpha")

    page.goto(url + "/")
    page.click("a:has-text('alpha')")
    page.wait_for_selector("ol.timeline")
    assert page.locator(".ev-action .result.error").count() == 1  # the failed call, under it
    shot(page, "03-timeline")

    covers = page.locator(".ev-compaction a.covers").first
    low, high = map(int, re.findall(r"#(\d+)", covers.inner_text()))
    covers.click()
    page.wait_for_url(re.compile(rf"from={low}&to={high}"))
    marked = page.locator("li.covered")
    seqs = [
        int(marked.nth(i).get_attribute("id").removeprefix("seq-")) for i in range(marked.count())
    ]
    assert seqs == list(range(low, high + 1))  # exactly the records the summary covers
    shot(page, "04-covered")

    page.goto(url + "/search?q=token+bucket")
    hit = page.locator("ol.hits a.provenance").first
    assert "alpha" in hit.inner_text()
    shot(page, "05-search")
    hit.click()
    page.wait_for_selector("li.covered")
    assert "token bucket" in page.locator("li.covered").first.inner_text()


def test_stored_markup_is_shown_as_text_and_never_runs(site, page) -> None:
    url, token, _ = site
    page.goto(f"{url}/?token={token}")  # a url's token signs no one in
    assert page.url.endswith("/login")
    sign_in(page, url, token)
    page.goto(url + "/sessions/beta")
    content = page.locator(".ev-user .content").first
    assert content.inner_text() == INJECTED
    assert page.evaluate("window.__pwned") is None
    assert page.locator(".ev-user script, .ev-user img").count() == 0
    shot(page, "06-injected-as-text")
    page.goto(url + "/search?q=pwned")
    assert page.evaluate("window.__pwned") is None


def test_a_users_viewer_shows_only_their_sessions(site, page) -> None:
    url, _, alice = site
    sign_in(page, url, alice)
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 1 and rows.first.inner_text().startswith("alpha")
    page.goto(url + "/sessions/beta")
    assert (
        "beta" not in page.locator("ol.timeline").inner_text()
        if page.locator("ol.timeline").count()
        else True
    )
    assert "pwned" not in page.content()
    page.goto(url + "/search?q=pwned")
    shown = page.locator("ol.hits").inner_text()  # semantic neighbours of alice's own, if any
    assert "pwned" not in shown and "beta" not in shown

"""Every page of the viewer in real headless Chromium over a workspace of hostile content
(script tags, markdown that tries links with unsafe schemes and raw HTML, a long unbroken
token): the analytics charts, a timeline with memory events as cards and its jump links,
learnings confirmed and rejected through the page's forms, verify against an uploaded seal,
pagination, and a phone-width layout that does not overflow. Each step leaves a screenshot
under ``build/screenshots/``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec.memory import MEMORY_SESSION, Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from tests.browser.test_viewer import CHROMIUM, playwright, shot, sign_in
from tests.browser.test_viewer import page as page
from tests.support.built import built_once, copy_of

pytestmark = [pytest.mark.slow]
LONG = "x" * 400  # one unbroken token, wider than any screen
HOSTILE = [
    "<script>window.__pwned = 1</script>",
    "[click me](javascript:window.__pwned=3) and <img src=x onerror='window.__pwned = 2'>",
    f"# heading\n\n**bold** `code` {LONG}",
]


ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "AIRSSPEC_MEMORY_HOT_TOKEN_BUDGET": "300"}


def _build(folder: Path) -> None:
    with Memory.open(folder / "ws", create=True) as memory:
        alice = memory.scoped(user="alice")
        alice.sessions.start("alpha", task="fix the parser", phase="improve")
        events = []
        for i in range(1, 11):
            events.append({"type": "user", "content": f"{HOSTILE[i % 3]} step {i}"})
            events.append({"type": "assistant", "content": f"done with case {i} in parser.py"})
        events += [
            {"type": "action", "id": "call-1", "tool": "bash", "params": {"cmd": "pytest"}},
            {"type": "observation", "action_id": "call-1", "result": "2 failed", "is_error": True},
        ]
        alice.append_many("alpha", events)
        assert alice.compact("alpha", force=True) is not None
        for n in range(55):  # more than one page of sessions
            alice.append_many(f"s{n:02d}", [{"type": "user", "content": f"hello {n}"}])
        memory.learnings.add(f"prefer pytest over unittest {HOSTILE[0]}", kind="preference")
        memory.learnings.add("never push on friday", kind="preference")
        assert memory.seal(folder / "seal.json") is not None


built = built_once(ENV, _build)


@pytest.fixture
def site(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with Memory.open(copy_of(built, tmp_path, monkeypatch, ENV) / "ws") as memory:
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            yield where["url"], served.local_token, memory, tmp_path / "seal.json"


def no_script_ran(page) -> None:
    assert page.evaluate("window.__pwned") is None


def test_sessions_page_by_page_without_the_memory_log(site, page) -> None:
    url, token, _, _ = site
    sign_in(page, url, token)
    listed = page.locator("table.sessions tbody tr")
    assert listed.count() == 50
    assert "page 1 of 2" in page.inner_text(".count")
    names = page.locator("table.sessions tbody td:first-child a").all_inner_texts()
    assert MEMORY_SESSION not in names
    time = page.locator("table.sessions time").first
    assert time.get_attribute("title") == time.get_attribute("datetime")  # exact on hover
    assert "." not in time.inner_text()  # no microseconds shown
    page.click("a[rel=next]")
    page.wait_for_url("**page=2")
    rest = page.locator("table.sessions tbody td:first-child a").all_inner_texts()
    assert len(rest) == 6 and not set(rest) & set(names)
    assert MEMORY_SESSION not in rest
    shot(page, "10-sessions-page-2")


def test_timeline_cards_markdown_and_jumps(site, page) -> None:
    url, token, _, _ = site
    sign_in(page, url, token)
    page.goto(url + "/sessions/alpha")
    card = page.locator(".ev-session_started .card")
    assert "fix the parser" in card.inner_text() and "alice" in card.inner_text()
    assert page.locator(".ev-session_started pre").count() == 0  # no raw JSON
    summary = page.locator(".ev-compaction .markdown")
    assert summary.count() == 1
    assert page.locator(".markdown script, .markdown img, .content script").count() == 0
    hrefs = page.locator("main a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert not [h for h in hrefs if h and h.lower().startswith("javascript")]
    error = page.locator("a.jump-error").first
    target = error.get_attribute("href")
    error.click()
    assert page.url.endswith(target)
    assert "is-error" in page.locator(target).get_attribute("class")
    assert page.locator("a.jump-summary").count() == 1
    no_script_ran(page)
    shot(page, "11-timeline-memory-events")


def test_analytics_page_draws_the_reports_as_svg_and_filters(site, page) -> None:
    url, token, memory, _ = site
    sign_in(page, url, token)
    page.goto(url + "/analytics")
    charts = page.locator("figure.chart")
    assert charts.count() == 4
    assert page.locator("figure.chart svg.bars").count() == 4
    captions = page.locator("figure.chart figcaption").all_inner_texts()
    assert [c.split("  ")[0].split(" succeeded")[0].strip() for c in captions] == [
        "Tool calls",
        "Tool calls per session",
        "Tokens per session",
        "Tokens per day",
    ]
    assert "bash" in charts.nth(0).inner_text()
    rows = memory.report("sessions")
    sessions = sum(1 for row in rows.rows if row[0] != MEMORY_SESSION)  # the log of learnings
    assert charts.nth(2).locator("svg.bars > text[text-anchor=end]").count() == sessions
    shot(page, "12-analytics")
    page.goto(url + "/analytics?text=&user=nobody")
    assert page.locator("figure.chart svg.bars").count() == 0
    assert page.locator("figure.chart .empty").count() == 4


def test_learnings_confirmed_and_rejected_through_the_form(site, page) -> None:
    url, token, memory, _ = site
    sign_in(page, url, token)
    page.goto(url + "/learnings")
    row = page.locator("tr", has_text="never push on friday")
    row.locator("input[name=reason]").first.fill("team rule")
    row.locator("button:has-text('Confirm')").click()
    page.wait_for_selector("table.learnings")
    row = page.locator("tr", has_text="prefer pytest")
    assert row.locator("script").count() == 0
    row.locator("button:has-text('Reject')").click()
    page.wait_for_selector("table.learnings")
    assert "rejected" in page.locator("tr", has_text="prefer pytest").inner_text()
    no_script_ran(page)
    shot(page, "13-curated-learning")
    verdicts = [
        (r.verdict, r.reason)
        for r in memory.replay(MEMORY_SESSION)
        if r.type == "learning_feedback"
    ]
    assert verdicts == [("confirmed", "team rule"), ("rejected", "")]


def test_verify_against_an_uploaded_seal(site, page) -> None:
    url, token, _, seal = site
    sign_in(page, url, token)
    page.goto(url + "/verify")
    page.set_input_files("input[name=seal]", str(seal))
    page.click("button:has-text('Verify against it')")
    page.wait_for_selector(".seal-note")
    assert page.inner_text(".verdict").startswith("OK")
    shot(page, "14-verify-seal")
    bad = seal.with_name("bad.json")
    bad.write_text(json.dumps({"not": "a seal"}))
    page.goto(url + "/verify")
    page.set_input_files("input[name=seal]", str(bad))
    page.click("button:has-text('Verify against it')")
    text = page.inner_text("main")
    assert "seal" in text.lower() and str(seal.parent) not in text


def test_phone_width_and_errors_without_paths(site, page) -> None:
    url, token, memory, _ = site
    sign_in(page, url, token)
    page.set_viewport_size({"width": 375, "height": 800})
    for path in ("/", "/sessions/alpha", "/analytics", "/learnings", "/verify"):
        page.goto(url + path)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 375, f"{path} is {wide}px wide at phone width"
    shot(page, "15-phone-timeline")
    for path in ("/sessions/no-such", "/nothing/here", "/static/none.css"):
        page.goto(url + path)
        assert str(memory.root) not in page.content()
        assert "/work" not in page.content() and "/tmp" not in page.content()


def test_chromium_is_the_one_configured() -> None:
    assert Path(CHROMIUM).name == "chromium" and playwright is not None

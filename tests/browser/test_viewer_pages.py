"""The viewer shows a session's visual-tier page (the PNG a model reads) in its timeline, in a
real browser, and serves a page only to a user who may read its session."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from airsspec.serve.tokens import TokenStore
from tests.browser.test_viewer import ARGS, CHROMIUM, pytestmark, shot, sign_in  # noqa: F401

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with Memory.open(tmp_path, create=True) as memory:
        for user, session in (("alice", "alpha"), ("bob", "beta")):
            owned = memory.scoped(user=user)
            owned.append_many(
                session,
                [
                    {"type": "user", "content": f"{session}: fix webhooks/retry_{n}.py"}
                    for n in range(8)
                ],
            )
            owned.compact(session, force=True)
        assert len(memory.visualize(["alpha", "beta"], force=True)) == 2
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            yield where["url"], TokenStore(memory.root).create("alice")[1]


def test_a_sessions_page_is_shown_and_another_users_is_not_served(site) -> None:
    url, alice = site
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            sign_in(page, url, alice)
            page.goto(url + "/sessions/alpha")
            image = page.locator("figure.page img")
            image.wait_for()
            width = image.evaluate("img => img.decode().then(() => img.naturalWidth)")
            assert width > 100  # the PNG loaded and decoded
            shot(page, "viewer-visual-page")
            mine = page.request.get(url + "/sessions/alpha/visual/summary-001.png")
            assert mine.status == 200 and mine.body()[:8] == b"\x89PNG\r\n\x1a\n"
            theirs = page.request.get(url + "/sessions/beta/visual/summary-002.png")
            assert theirs.status == 404 and b"PNG" not in theirs.body()[:8]
        finally:
            browser.close()

"""The visual tier through ``Memory``: the policy moves a project's oldest warm sessions to
images, recorded in the log; a rebuild renders every PNG byte for byte; ``verify --tiers``
sees a changed page; ``context(images=True)`` validates against the Anthropic SDK's types
within its budget; a scoped reader sees only its own pages; ``forget`` removes a user's."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from anthropic import types as anthropic_types
from pydantic import TypeAdapter

from airsspec import Memory
from airsspec.errors import InvalidQueryError
from projections.pages import DENSITIES, image_tokens, png_size, png_text, render
from projections.visual import page_text, provenance
from tests.conftest import REPO, init_encrypted, init_workspace
from tests.support.cli import run_cli

ANTHROPIC = TypeAdapter(list[anthropic_types.MessageParam])
SESSIONS = ["s1", "s2", "s3", "s4"]


@pytest.fixture
def root(tmp_path: Path, offline: None, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIRSSPEC_VISUAL_WARM_SESSIONS", "2")
    return init_workspace(tmp_path)


def _session(memory: Memory, session: str, user: str | None = None) -> None:
    if user is not None:
        memory.sessions.start(session, user=user, project="shop")
    memory.append_many(
        session,
        [
            {"type": "user", "content": f"{session}: add rate limiting to api/{session}/upload.py"},
            {"type": "assistant", "content": f"Plan for {session}: token bucket in limits.py"},
        ]
        * 6,
    )
    memory.compact(session, force=True)


def _pages(root: Path) -> dict[str, bytes]:
    folder = root / ".airsspec" / "knowledge" / "visual"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*"))} if folder.is_dir() else {}


def test_the_policy_moves_the_oldest_past_the_threshold_and_records_it(root: Path) -> None:
    with Memory.open(root) as memory:
        for session in SESSIONS:
            _session(memory, session)
        moved = memory.visualize()
        assert [(r.session, r.type) for r in moved] == [("s1", "visualized"), ("s2", "visualized")]
        assert memory.visualize() == []  # two warm sessions left: within the threshold
        assert [r.session for r in memory.visualize(["s3"], force=True)] == ["s3"]
        logged = [r.record for r in memory.workspace.log.read("s1")][-1]
        assert logged.type == "visualized" and logged.library_no == moved[0].library_no
    pages = _pages(root)
    assert {"summary-001.png", "summary-001.json", "summary-002.png", "summary-003.png"} <= set(
        pages
    )
    chunk = png_text(pages["summary-001.png"])["airsspec:provenance"]
    assert '"session":"s1"' in chunk and moved[0].hash in chunk
    assert (root / ".airsspec" / "knowledge" / "library" / "history-001.md").exists()  # kept


def test_rebuild_renders_every_page_byte_for_byte_and_verify_sees_a_changed_one(
    root: Path,
) -> None:
    with Memory.open(root) as memory:
        for session in SESSIONS:
            _session(memory, session)
        memory.visualize()
    before = _pages(root)
    assert before
    done = run_cli("-w", str(root / ".airsspec"), "rebuild", cwd=root)
    assert done.returncode == 0, done.stderr
    assert _pages(root) == before
    page = root / ".airsspec" / "knowledge" / "visual" / "summary-001.png"
    page.write_bytes(page.read_bytes()[:-20])
    done = run_cli("-w", str(root / ".airsspec"), "verify", "--tiers", cwd=root)
    assert done.returncode == 1 and b"visual" in done.stdout + done.stderr


def test_a_context_with_images_validates_against_the_sdk_and_stays_within_budget(
    root: Path,
) -> None:
    with Memory.open(root) as memory:
        for session in SESSIONS:
            _session(memory, session)
        memory.visualize()
        counter = memory.workspace.token_counter()
        for budget in (300, 1500, 6000):
            messages = memory.context("s4", budget, format="anthropic", images=True)
            ANTHROPIC.validate_python(messages)
            blocks = [b for m in messages for b in m["content"]]
            images = [b for b in blocks if b["type"] == "image"]
            cost = sum(
                image_tokens(*png_size(base64.b64decode(b["source"]["data"]))) for b in images
            )
            texts = "\n\n".join(b["text"] for b in blocks if b["type"] == "text")
            assert cost + counter.count(texts) <= budget
            assert bool(images) == (budget >= 1500)  # a page costs about 300 tokens here
        with pytest.raises(InvalidQueryError):
            memory.context("s4", 1000, format="text", images=True)
        parts = memory.load_context(None, session="s4")
        assert set(parts) == {"hot", "warm", "cold_images", "archive_images", "tokens"}
        assert len(parts["cold_images"]) == 4 and parts["tokens"]["cold_images"] > 0
        assert parts["tokens"]["total"] == sum(
            parts["tokens"][k] for k in ("hot", "warm", "cold_images", "archive_images")
        )


def test_a_scoped_reader_sees_only_pages_of_sessions_it_may_read(root: Path) -> None:
    with Memory.open(root) as memory:
        for n, session in enumerate(SESSIONS):
            _session(memory, session, user="ann" if n % 2 else "bob")
        memory.visualize(force=True, sessions=SESSIONS)
    with Memory.open(root, user="ann") as ann:
        shown = ann.load_context("shop", session="s2")
        captions = [b["text"] for b in shown["cold_images"] if b["type"] == "text"]
        assert captions and all("session s4" in c for c in captions)  # s2 is hers; s1, s3 bob's
        messages = ann.context("s2", 6000, format="anthropic", images=True)
        text = str(messages)
        assert "session s1" not in text and "session s3" not in text


def test_forget_removes_a_users_pages(tmp_path: Path, offline: None) -> None:
    root = init_encrypted(tmp_path)
    with Memory.open(root) as memory:
        for n, session in enumerate(SESSIONS):
            _session(memory, session, user="ann" if n % 2 else "bob")
        memory.visualize(force=True, sessions=SESSIONS)
        before = _pages(root)
        memory.forget(user="ann")
        after = _pages(root)
        for session, name in (("s2", "summary-002.png"), ("s4", "summary-004.png")):
            *_, compaction, moved = [r.record for r in memory.workspace.log.read(session)]
            shown = page_text(compaction)
            assert "rate limiting" not in shown and "[forgotten]" in shown
            origin = {"airsspec:provenance": provenance(compaction, moved)}
            assert after[name] == render(shown, DENSITIES["dense"], origin)[0] != before[name]
    assert after["summary-001.png"] == before["summary-001.png"]  # bob's stay as they were
    assert after["summary-003.png"] == before["summary-003.png"]


def test_the_policy_runs_after_a_compaction_as_the_daemon_and_hooks_drive_it(root: Path) -> None:
    with Memory.open(root) as memory:
        for session in SESSIONS[:2]:
            _session(memory, session)
        memory.append_many("s3", [{"type": "user", "content": "x " * 400}] * 30)
        appended = memory.run_policies("s3")
        assert [r.type for r in appended["compact"]] == ["compaction"]
        assert [r.session for r in appended["visualize"]] == ["s1"]  # 3 warm > 2


@pytest.mark.slow
def test_every_example_of_the_visual_memory_doc_runs_as_written(tmp_path: Path) -> None:
    text = (REPO / "docs" / "visual-memory.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(sh|python)\n(.*?)^```$", text, re.S | re.M)
    assert [lang for lang, _ in blocks] == ["sh", "sh", "python"]
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    shutil.copytree(
        REPO / ".airsspec-example" / "contexts",
        tmp_path / ".airsspec" / "contexts",
        dirs_exist_ok=True,
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRSSPEC_COLD_EMBEDDER": "hash",
        "ANTHROPIC_API_KEY": "",
        "PYTHONPATH": str(REPO),
    }
    for lang, body in blocks:
        command = ["bash", "-euo", "pipefail", "-c", body] if lang == "sh" else [sys.executable]
        done = subprocess.run(
            command if lang == "sh" else [*command, "-c", body],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, (body, done.stderr)
    assert (tmp_path / ".airsspec" / "knowledge" / "visual" / "summary-001.png").exists()

"""The people's operations of ``airsspec serve`` (``OPS``: ``edit_learning``, ``forget``,
``tokens``, ``create_token``, ``revoke_token``) and ``airsspec learnings edit``: each change is
recorded with its actor, the caller's name taken from its token (never from the request); forget
answers with its receipt and the tokens are managed by an admin's token only (403 for any other,
nothing changed); forget and revoke are the only tools MCP is told are destructive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec.memory import MEMORY_SESSION, Memory
from airsspec.serve.ops import OPS
from airsspec.serve.tokens import TokenStore
from tests.airsspec.test_serve_hostile import http
from tests.conftest import init_encrypted
from tests.support.cli import run_cli


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    for name in ("USER", "AGENT", "PROJECT", "TOKEN"):
        monkeypatch.delenv(f"AIRSSPEC_{name}", raising=False)
    with Memory.open(init_encrypted(tmp_path / "ws")) as memory:
        yield memory


def curated(memory: Memory) -> list[tuple[str, str | None]]:
    return [
        (r.type, r.actor)
        for r in memory.replay(MEMORY_SESSION)
        if r.type in ("learning_edited", "learning_feedback")
    ]


def test_an_edit_and_a_verdict_over_http_record_the_tokens_user_as_actor(server, memory) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    root, alice = store.create("root", admin=True)[1], store.create("alice")[1]
    mine = memory.scoped(user="alice").learnings.add("prefer tabs").learning_id
    with http(url, alice) as client:
        edited = client.post(
            "/v1/learnings/edit",
            json={"learning_id": mine, "text": "prefer spaces", "reason": "team style"},
        )
        assert edited.status_code == 200, edited.text
        assert edited.json()["actor"] == "alice" and edited.json()["text"] == "prefer spaces"
        spoofed = client.post("/v1/learnings/edit", json={"learning_id": mine, "by": "root"})
        assert spoofed.status_code == 400 and "by" in spoofed.json()["detail"]
        same = client.post("/v1/learnings/edit", json={"learning_id": mine, "scope": "project"})
        assert same.status_code == 400 and "already reads so" in same.json()["detail"]
        wider = client.post("/v1/learnings/edit", json={"learning_id": mine, "scope": "global"})
        assert wider.status_code == 403
    with http(url, root) as admin:
        verdict = {"learning_id": mine, "verdict": "confirmed"}
        assert admin.post("/v1/learnings/feedback", json=verdict).status_code == 200
        made = admin.post("/v1/learnings/edit", json={"learning_id": mine, "scope": "global"})
        assert made.status_code == 200 and made.json()["actor"] == "root"
    assert curated(memory) == [
        ("learning_edited", "alice"),
        ("learning_feedback", "root"),
        ("learning_edited", "root"),
    ]
    found = memory.learnings.get(mine)
    assert (found.text, found.scope) == ("prefer spaces", "global")


def test_forget_over_http_is_an_admins_and_answers_its_receipt(server, memory) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    root, alice = store.create("root", admin=True)[1], store.create("alice")[1]
    reader = store.create("root", admin=True, read_only=True)[1]
    memory.scoped(user="bob").append_many("beta", [{"type": "user", "content": "BOBCANARY plan"}])
    memory.scoped(user="alice").append_many("alpha", [{"type": "user", "content": "mine"}])
    before = sorted((p.name, p.stat().st_size) for p in memory.log_dir.rglob("*.jsonl"))
    for token in (alice, reader):
        with http(url, token) as client:
            for body in ({"session": "beta"}, {"user": "alice"}, {"session": "alpha"}):
                refused = client.post("/v1/forget", json=body)
                assert refused.status_code == 403, refused.text
    assert sorted((p.name, p.stat().st_size) for p in memory.log_dir.rglob("*.jsonl")) == before
    with http(url, root) as admin:
        answer = admin.post("/v1/forget", json={"session": "beta"})
    assert answer.status_code == 200, answer.text
    receipt = answer.json()
    assert (receipt["subject"], receipt["name"], receipt["by"]) == ("session", "beta", "root")
    assert receipt["sessions"] == ["beta"] and receipt["records_forgotten"] >= 1
    assert "BOBCANARY" not in answer.text
    assert [r.content for r in memory.replay("beta") if r.type == "user"] == ["[forgotten]"]


def test_tokens_are_listed_made_and_revoked_by_an_admins_token_only(server, memory) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    root, alice = store.create("root", admin=True)[1], store.create("alice")[1]
    with http(url, alice) as client:
        assert client.get("/v1/tokens").status_code == 403
        assert client.post("/v1/tokens", json={"user": "alice", "admin": True}).status_code == 403
        victim = store.entries()[0].id
        assert client.post("/v1/tokens/revoke", json={"token_id": victim}).status_code == 403
    assert len(store.entries()) == 2
    with http(url, root) as admin:
        listed = admin.get("/v1/tokens").json()
        assert [(t["user"], t["admin"]) for t in listed] == [("root", True), ("alice", False)]
        assert all("sha256" not in t and "token" not in t for t in listed)
        made = admin.post("/v1/tokens", json={"user": "carol", "read_only": True}).json()
        assert made["token"].startswith("airs_") and made["read_only"] is True
    with http(url, made["token"]) as carol:
        assert carol.get("/v1/sessions").status_code == 200
        assert carol.post("/v1/learnings", json={"text": "x"}).status_code == 403  # read-only
    with http(url, root) as admin:
        gone = admin.post("/v1/tokens/revoke", json={"token_id": made["id"]})
        assert gone.status_code == 200 and gone.json()["user"] == "carol"
        unknown = admin.post("/v1/tokens/revoke", json={"token_id": made["id"]})
        assert unknown.status_code == 400 and made["id"] in unknown.json()["detail"]
    with http(url, made["token"]) as carol:
        assert carol.get("/v1/sessions").status_code == 401


def test_the_last_admin_token_is_not_revoked_over_http(server, memory) -> None:
    """No request could make another admin token: revoking the last one is refused (400) and
    the file is unchanged; with a second admin, the first may go, itself included."""
    url, _ = server
    store = TokenStore(memory.root)
    entry, root = store.create("root", admin=True)
    before = store.entries()
    with http(url, root) as admin:
        refused = admin.post("/v1/tokens/revoke", json={"token_id": entry.id})
        assert refused.status_code == 400 and "last admin token" in refused.json()["detail"]
        assert store.entries() == before
        admin.post("/v1/tokens", json={"user": "deputy", "admin": True}).raise_for_status()
        assert admin.post("/v1/tokens/revoke", json={"token_id": entry.id}).status_code == 200
    assert [(e.user, e.admin) for e in store.entries()] == [("deputy", True)]


def test_mcp_is_told_only_forget_and_revoke_destroy_something(server, memory) -> None:
    url, served = server
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    with http(url, served.local_token, Accept="application/json, text/event-stream") as client:
        tools = client.post("/mcp", json=request).json()["result"]["tools"]
    destructive = {t["name"] for t in tools if t["annotations"]["destructiveHint"]}
    assert destructive == {"forget", "revoke_token"} == {op.name for op in OPS if op.destructive}
    edit = next(t for t in tools if t["name"] == "edit_learning")
    assert "by" not in edit["inputSchema"]["properties"]  # the caller is the token's user


def test_the_cli_edits_a_learning_and_shows_every_change(memory) -> None:
    added = memory.learnings.add("run the linter").learning_id
    env = {"AIRSSPEC_USER": "", "AIRSSPEC_COLD_EMBEDDER": "hash"}
    root = memory.root
    done = run_cli(
        "-w", root, "learnings", "edit", added[:8], "--text", "run ruff", "--by", "dave",
        "--reason", "sharper", "--json", cwd=root, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) | {"seq": 0} == {
        "learning_id": added,
        "edited": True,
        "actor": "dave",
        "seq": 0,
    }
    again = run_cli("-w", root, "learnings", "edit", added, "--text", "run ruff", cwd=root, env=env)
    said = again.stderr.decode()
    assert again.returncode != 0 and said.startswith("airsspec: error: learning")
    assert "already reads so" in said and "Traceback" not in said and said.count("\n") == 1
    bad = run_cli(
        "-w", root, "learnings", "edit", added, "--scope", "everywhere", cwd=root, env=env
    )
    assert bad.returncode == 2 and "--scope" in bad.stderr.decode()
    shown = run_cli("-w", root, "learnings", "show", added, cwd=root, env=env)
    assert "edited by dave" in shown.stdout.decode()
    assert "'run ruff': sharper" in shown.stdout.decode()
    assert memory.learnings.get(added).text == "run ruff"


def test_the_overview_names_no_path_of_the_servers_machine(server, memory) -> None:
    """``status`` through a server: the answer leaves the workspace's folder out (the light
    client fills in the one it found); a tenant learns no path of the server's machine."""
    url, _ = server
    alice = TokenStore(memory.root).create("alice")[1]
    with http(url, alice) as client:
        answer = client.get("/v1/overview")
    assert answer.status_code == 200 and "tiers" in answer.json()
    assert "workspace" not in answer.json()
    assert str(memory.root) not in answer.text and str(memory.root.parent) not in answer.text

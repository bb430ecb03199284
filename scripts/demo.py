"""The main job of ``make demo``: a new user's first tour, run on a copy of the example
workspace (``.airsspec-example/``) so the checkout stays untouched.

Each step prints the command as a user would type it, then its output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from airsspec.workspace import Workspace  # noqa: E402

EXAMPLE = REPO / ".airsspec-example"


def run(
    cwd: Path,
    *args: str,
    stdin: str | None = None,
    expect: int | None = 0,
    max_lines: int | None = None,
    width: int | None = None,
    env: dict[str, str] | None = None,
) -> str:
    shown = " ".join(a if " " not in a and "/" not in a else repr(a) for a in args)
    prefix = "".join(f"{k}={v!r} " for k, v in (env or {}).items())
    line = f"\n$ {prefix}airsspec {shown}" + (f"  <<< {stdin.strip()!r}" if stdin else "")
    print(line, flush=True)
    result = subprocess.run(
        [sys.executable, "-m", "airsspec", *args],
        cwd=cwd,
        text=True,
        input=stdin,
        capture_output=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    output = (result.stdout + result.stderr).rstrip("\n")
    lines = output.splitlines()
    if width is not None:
        lines = [line if len(line) <= width else line[:width] + " ..." for line in lines]
    if max_lines is not None and len(lines) > max_lines:
        lines = [*lines[:max_lines], f"... ({len(lines) - max_lines} more lines)"]
    print("\n".join(lines), flush=True)
    if expect is not None and result.returncode != expect:
        sys.exit(f"demo step failed: exit {result.returncode}, expected {expect}")
    return result.stdout


RELEASE_CHECKLIST = """# Release checklist

## Sign-off
A release needs sign-off from the on-call lead and one reviewer from another team.

## Rollback
Keep the previous build for 7 days; roll back with `deploy --previous`.
"""


FIVE_LINES = """
from airsspec import Memory

with Memory.open("demo-project", create=True) as memory:
    memory.append("s1", {"type": "user", "content": "Add rate limiting to the upload API"})
    print(memory.context("s1", budget=2000))
    print(memory.search("rate limiting", k=3)["hits"][0]["text"])
"""


async def mcp_demo(target: Path) -> None:
    """Start ``airsspec mcp`` as Claude Desktop or Cursor would, list its tools, ask once."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "airsspec", "-w", str(target / ".airsspec"), "mcp"]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        question = {"query": "why were users logged out after five minutes?", "k": 2}
        print(f"call query_memory {question}")
        answer = await session.call_tool("query_memory", question)
        for hit in (answer.structured_content or {}).get("hits", []):
            print(f"  {hit['from']}  {hit['text'][:90]}")  # the tool's compact shape


def holding(root: Path, needle: bytes) -> list[str]:
    """The files under ``root`` whose bytes hold ``needle`` (what ``grep -rl`` finds)."""
    return sorted(
        str(f.relative_to(root))
        for f in root.rglob("*")
        if f.is_file() and needle in f.read_bytes()
    )


def forget_demo(root: Path) -> None:
    """Two users' memories in one encrypted workspace; one user is forgotten everywhere."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    run(root, "init", ".")
    with (root / "airsspec.toml").open("a") as config:
        config.write('\n[privacy]\nencrypt = "user"\n')
    print('(airsspec.toml: [privacy] encrypt = "user": each user\'s records under their own key)')
    for user, text in (("ana", "My card ends 4242, CANARY-ANA"), ("ben", "Ship the API on Monday")):
        run(root, "session", "start", f"{user}-1", "--user", user)
        run(root, "append", f"{user}-1", stdin=json.dumps({"type": "user", "content": text}))
    print("-- ana's handover session, given to ben, who goes on in it --")
    said = {"type": "user", "content": "Handover: the card vault is in eu-west, CANARY-ANA"}
    run(root, "session", "start", "handover", "--user", "ana")
    run(root, "append", "handover", stdin=json.dumps(said))
    run(root, "session", "assign", "handover", "--user", "ben")
    said = {"type": "user", "content": "Ben here: I moved the vault to eu-central."}
    run(root, "append", "handover", stdin=json.dumps(said), env={"AIRSSPEC_USER": "ben"})
    run(root, "project")
    print("files holding CANARY-ANA (grep -rl):", *holding(root, b"CANARY-ANA"), sep="\n  ")
    run(root, "forget", "--user", "ana", "--by", "dpo")
    print(f"files holding CANARY-ANA now: {len(holding(root, b'CANARY-ANA'))}")
    run(root, "replay", "ana-1")
    print("-- her words in the session she handed over are gone; ben's stay --")
    run(root, "replay", "handover", "--from", "2")
    run(root, "search", "when does the API ship?", "-k", "1")
    run(root, "verify")


def claude_memory_demo(root: Path) -> None:
    """Claude's memory tool on the log: a recorded conversation's commands replayed through
    the SDK's tool runner (no network), the file's versions, then its user forgotten."""
    import httpx2
    from anthropic import Anthropic

    from airsspec.integrations.anthropic_memory import MemoryTool
    from airsspec.memory import Memory

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    run(root, "init", ".")
    with (root / "airsspec.toml").open("a") as config:
        config.write('\n[privacy]\nencrypt = "user"\n')
    recorded = json.loads((REPO / "tests/fixtures/anthropic/memory_tool_turns.json").read_text())
    answers = iter(recorded["responses"])

    def api(request: httpx2.Request) -> httpx2.Response:  # the Messages API, as recorded
        sent = json.loads(request.content)["messages"][-1]["content"]
        for block in sent if isinstance(sent, list) else []:
            print(f"   -> {block['content'].splitlines()[0]}")
        answer = next(answers)
        for block in answer["content"]:
            if block["type"] == "tool_use":
                print(f"claude: memory {json.dumps(block['input'])[:110]}")
        return httpx2.Response(200, json=answer)

    client = Anthropic(
        api_key="replayed", http_client=httpx2.Client(transport=httpx2.MockTransport(api))
    )
    with Memory.open(root) as memory:
        ana = memory.scoped(user="ana", agent="claude")
        tool = MemoryTool(ana, actor="claude-sonnet-5-5")
        client.beta.messages.tool_runner(tools=[tool], **recorded["request"]).until_done()
        print("\nhistory of /memories/preferences.md (every version a record of the log):")
        for v in ana.files.history("/memories/preferences.md"):
            print(
                f"  seq {v.seq}  {v.op:<7} {v.command:<11} by {v.agent}/{v.actor}  {v.sha256[:12]}"
            )
    run(root, "replay", "airsspec.memory", max_lines=6, width=150)
    print("files holding 'deploy day' (grep -rl):", *holding(root, b"deploy day"), sep="\n  ")
    run(root, "forget", "--user", "ana")
    print(f"files holding 'deploy day' now: {len(holding(root, b'deploy day'))}")
    run(root, "verify")


def bucket_demo(root: Path) -> None:
    """Two machines (each its own folder and cache) share one log on an S3 bucket (a local
    moto server stands in for S3)."""
    try:
        from tests.support.s3 import moto_server, new_bucket, storage_section
    except ImportError as exc:  # moto is in the [s3] and [dev] extras
        print(f"(skipped: {exc}; pip install 'airsspec-memory[s3]')")
        return
    shutil.rmtree(root, ignore_errors=True)
    with moto_server() as (endpoint, _):
        url = new_bucket(endpoint)
        storage = storage_section(url, endpoint)
        machines = {name: root / name for name in ("laptop", "ci-runner")}
        for folder in machines.values():
            folder.mkdir(parents=True)
            (folder / "airsspec.toml").write_text(storage)
        print(f"(both airsspec.toml files: [storage] url = {url!r}, endpoint = {endpoint!r})")
        laptop, runner = machines.values()
        line = '{"type": "user", "content": "Pin the parser to v2 in CI."}'
        print("-- on the laptop --")
        run(laptop, "append", "shared-plan", stdin=line)
        print("-- on the CI runner: the same log, read from the bucket --")
        run(runner, "replay", "shared-plan")
        run(runner, "append", "shared-plan", stdin='{"type": "assistant", "content": "Pinned."}')
        print("-- back on the laptop: one chain, both writers, verified --")
        run(laptop, "verify", "shared-plan")
        run(laptop, "search", "parser version in CI", "-k", "1")


def cold_rows(target: Path) -> list[dict]:
    """Every row of the cold tier (vectors included), in unit order."""
    with Workspace.open(config=target / "airsspec.toml") as ws:
        table = ws.recall().store.open()
        return [] if table is None else table.to_arrow().sort_by("unit_id").to_pylist()


def watch_demo(target: Path) -> None:
    """Start ``airsspec watch``, append from this process, show the record arrive, stop it."""
    print("\n$ airsspec watch &", flush=True)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "watch"], cwd=target, stderr=subprocess.PIPE, text=True
    )
    assert daemon.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [*map(lines.put, daemon.stderr)], daemon=True)
    reader.start()

    def shown(text: str, within: float = 120) -> None:
        """Print what the daemon says up to a line holding ``text``; give up after ``within``
        seconds."""
        deadline = time.monotonic() + within
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                daemon.kill()
                sys.exit(f"demo step failed: the daemon did not say {text!r} in {within:.0f}s")
            print(line.rstrip())
            if text in line:
                return

    shown("watching")
    appended = run(
        target,
        "append",
        "review-release-specs",
        "-",
        stdin='{"type": "user", "content": "Release approved. Tag v1.4.0."}\n',
    )
    assert "seq " in appended  # append brought the hot window along itself; the daemon
    shown("cold: review-release-specs +")  # folds the rest and indexes it for search
    daemon.terminate()
    daemon.wait(timeout=30)
    reader.join(timeout=30)  # its last lines: the daemon saying it stopped
    while not lines.empty():
        print(lines.get().rstrip())
    run(target, "hot", "review-release-specs", "--budget", "40")


def curl(url: str, token: str, path: str, body: str = "{}") -> tuple[int, str]:
    """POST ``body`` to the server as a user would with curl; (status, answer)."""
    shown = f"curl -H 'Authorization: Bearer airs_...' -X POST {url}{path} -d '{body}'"
    print(f"\n$ {shown}", flush=True)
    auth = f"Authorization: Bearer {token}"
    done = subprocess.run(
        ["curl", "-s", "-w", "\n%{http_code}", "-H", auth, "-X", "POST", url + path, "-d", body],
        capture_output=True,
        text=True,
        check=True,
    )
    answer, _, status = done.stdout.rpartition("\n")
    return int(status), answer


def serve_demo(target: Path) -> None:
    """Start ``airsspec serve``: a user's token reads its own sessions and the team's, never
    another user's; a hook goes through the server; the viewer, signed in by its own form."""
    demo = run(target, "token", "create", "--user", "demo").strip()
    ben = run(target, "token", "create", "--user", "ben").strip()
    run(target, "token", "create", "--user", "ops", "--admin", max_lines=1, width=40)
    print("\n$ airsspec serve --port 0 &", flush=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "serve", "--port", "0"],
        cwd=target,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        print(server.stdout.readline().rstrip(), flush=True)  # printed once it listens
        state = json.loads((target / ".airsspec" / "state" / "serve.json").read_text())
        url = state["url"]
        print("(the example's sessions were written without a user: they are the team's)")
        asked = '{"query": "per API key limits", "k": 2, "detail": true}'
        status, found = curl(url, demo, "/v1/search", asked)
        hits = json.loads(found)["hits"]
        assert status == 200 and hits, f"the demo user's search found nothing: {found[:300]}"
        for hit in hits:
            print(f"  {hit['session']} #{hit['seq_from']}: {hit['text'][:100]}")
        run(target, "session", "assign", "spec-rate-limiter", "--user", "demo")
        for who, token in (("ben", ben), ("demo", demo)):
            status, answer = curl(url, token, "/v1/sessions/spec-rate-limiter/replay")
            shown = answer if status != 200 else f"{len(json.loads(answer))} records"
            print(f"  as {who}: {status} {shown[:100]}")
        started = time.perf_counter()
        run(
            target,
            "hook",
            "session-start",
            stdin='{"session_id": "a-new-session"}\n',
            max_lines=4,
            width=120,
        )
        print(f"(the hook went through the server: {time.perf_counter() - started:.2f} s)")
        shot = target.parent / "viewer.png"
        if viewer_screenshot(url, demo, "/sessions/spec-rate-limiter", shot):
            print(f"\nthe viewer, signed in as demo, as a browser shows it: {shot}")
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(
        f"stopped; discovery file left behind: {(target / '.airsspec/state/serve.json').exists()}"
    )


def trust_demo(private: Path) -> None:
    """Names are values, never paths; a cloned repository's settings import none of its code."""
    files = sorted(p for p in private.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    run(private, "forget", "--user", "../..", env={"AIRSSPEC_USER": "../.."}, expect=2)
    after = {p: p.read_bytes() for p in sorted(p for p in private.rglob("*") if p.is_file())}
    print(f"the workspace's {len(before)} files, byte for byte as before: {after == before}")
    clone = private.parent / "demo-cloned-repo"
    shutil.rmtree(clone, ignore_errors=True)
    clone.mkdir()
    canary = clone / "evilmod-ran"
    (clone / "evilmod.py").write_text(f"open({str(canary)!r}, 'w').close()\nkeys = dict\n")
    run(clone, "init", ".")
    with (clone / "airsspec.toml").open("a") as config:
        config.write('\n[privacy]\nkeys = "evilmod:keys"\n')
    print("(a cloned repository: evilmod.py beside an airsspec.toml naming it as its key store)")
    run(clone, "status", expect=2)
    print(f"evilmod.py was imported: {canary.exists()}")
    print("\n-- nor does its config choose where a conversation goes: hooks wait for trust --")
    shutil.rmtree(clone, ignore_errors=True)
    clone.mkdir()
    (clone / "airsspec.toml").write_text('[workspace]\npath = "../demo-where-they-chose"\n')
    hook = json.dumps({"session_id": "s-1", "cwd": str(clone)})
    run(clone, "hook", "SessionStart", stdin=hook, expect=1, width=150)
    chosen = clone.parent / "demo-where-they-chose"
    print(f"a folder made where the cloned config chose: {chosen.exists()}")
    run(clone, "trust")
    run(clone, "hook", "SessionStart", stdin=hook, max_lines=3, width=120)
    print("(trusted: the hook ran, exit 0, with nothing to brief yet in a new workspace)")
    shutil.rmtree(chosen, ignore_errors=True)


def viewer_screenshot(url: str, token: str, page_path: str, path: Path) -> bool:
    """A screenshot of the viewer's ``page_path``, signed in with ``token`` through its own
    form, with Playwright and the system's Chromium, when both exist."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        print("\n(no screenshot: Playwright or Chromium is not installed)")
        return False
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url + "/login")
        page.fill("input[name=token]", token)
        page.click("button:has-text('Sign in')")
        page.wait_for_selector("table.sessions")
        page.goto(url + page_path)
        page.screenshot(path=str(path))
        browser.close()
    return True


def facts_demo(target: Path) -> None:
    """Two sessions require opposite things of one subject: the later fact holds, the earlier
    is kept with when it stopped and which record changed it; a person edits a learning (with
    its actor); the next session's context says what each part of its budget went to."""
    for session, rule in (
        ("tue-emails", "Emails must be lowercased before they are stored."),
        ("thu-emails", "Emails must be stored exactly as typed, case included."),
    ):
        run(target, "session", "start", session, "--task", "the signup form")
        run(target, "append", session, "-", stdin=json.dumps({"type": "user", "content": rule}))
        run(target, "session", "end", session)
    print("-- the fact that holds now, then with --history what it replaced (and since when) --")
    run(target, "facts", "emails", width=150)
    run(target, "facts", "emails", "--history", width=150)
    print("\n-- a person sharpens a learning's text; the edit is an event with its actor --")
    listed = json.loads(run(target, "learnings", "list", "--json", max_lines=0))
    exports = next(a for a in listed["learnings"] if "default export" in a["text"].lower())
    print(f"   (the learning: {exports['id']} {exports['text']!r})")
    sharper = "Use named exports only; never export default (the team's lint rule)."
    run(target, "learnings", "edit", exports["id"], "--text", sharper, "--by", "lead")
    print("\n-- a new session's context, each part with its share of the budget --")
    run(target, "session", "start", "sat-signup", "--task", "finish the signup form")
    answer = run(target, "context", "sat-signup", "--budget", "800", "--json", max_lines=0)
    context = json.loads(answer)
    print(context["context"])
    print("-- what each part took of the 800 tokens --")
    for name, part in context["parts"].items():
        print(f"  {name:<9} {part['tokens']:>4} tokens ({part['share']:.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workspace", default="build/demo", help="where to put the demo copy")
    target = (REPO / parser.parse_args().workspace).resolve()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    # the configs the demo's workspaces trust for the hooks (airsspec.trust) stay beside them
    os.environ["XDG_CONFIG_HOME"] = str(target.parent / "demo-config")

    print("== 0. Memory in five lines of Python ==")
    five = target.parent / "demo-five-lines"
    shutil.rmtree(five, ignore_errors=True)
    five.mkdir(parents=True)
    print(FIVE_LINES.strip())
    done = subprocess.run(
        [sys.executable, "-c", FIVE_LINES], cwd=five, capture_output=True, text=True, check=False
    )
    print(done.stdout.rstrip())
    if done.returncode != 0:
        sys.exit(f"demo step failed: {done.stderr}")

    print("\n== 1. A workspace, seeded with the example agent sessions ==")
    print("-- every command, grouped; each action has its own help (airsspec learnings add --help)")
    run(target, "--help", max_lines=48, width=110)
    run(target, "init", ".")
    shutil.copytree(EXAMPLE / "contexts", target / ".airsspec" / "contexts", dirs_exist_ok=True)
    run(target, "sessions")

    print("\n== 2. The log is tamper-evident: verify the hash chain ==")
    run(target, "verify")

    print("\n== 3. Replay what the agent did (an error, its cause, and the fix) ==")
    run(target, "replay", "bugfix-login-timeout", "--from", "6", "--until", "13")

    print("\n== 4. Append new events; invalid input is refused and nothing is written ==")
    run(
        target,
        "append",
        "bugfix-login-timeout",
        "-",
        stdin='{"type": "user", "content": "Ship it.", "meta": {"kind": "approval"}}\n',
    )
    run(
        target,
        "append",
        "bugfix-login-timeout",
        "-",
        expect=2,
        stdin='{"type": "user", "content": "typo", "contnet": "x"}\n',
    )
    run(
        target,
        "append",
        "../../etc",
        "-",
        expect=2,
        stdin='{"type": "user", "content": "escape attempt"}\n',
    )
    print("-- two agents both read up to the approval (seq 22), then act on it: one lands --")
    for text, expect in (("Tagging v1.4.", 0), ("Tagging v1.4 too.", 1)):
        stdin = f'{{"type": "assistant", "content": "{text}"}}\n'
        run(target, "append", "bugfix-login-timeout", "--after", "22", expect=expect, stdin=stdin)

    print("\n== 5. Project the hot tier: the last messages of each session, with tokens ==")
    run(target, "status")
    run(target, "project")
    run(target, "hot", "spec-webhooks", max_lines=8)
    print("\n-- what an agent puts in its prompt, within a 120-token budget --")
    run(target, "hot", "spec-webhooks", "--budget", "120")

    print("\n== 6. Compact: the oldest half of what no summary covers is tree-reduced ==")
    print(
        "-- sessions compact by themselves once they pass 80% of hot_token_budget (8,000 tokens);"
    )
    print("-- these short ones are far below, so --force compacts them now --")
    run(target, "compact")
    run(target, "compact", "--force")
    run(target, "library")
    run(target, "library", "--show", "4", max_lines=30)
    print("\n-- the hot window now starts with the summary link; the prompt text leads with it --")
    run(target, "hot", "spec-webhooks", max_lines=4)
    run(target, "hot", "spec-webhooks", "--budget", "200", max_lines=12)
    print("\n-- context: what to put in the prompt, with passages recalled for a question --")
    run(target, "context", "spec-webhooks", "--budget", "350", "--query", "HMAC signing secret")
    print("\n-- a session starting tomorrow begins with what the latest other sessions left --")
    run(target, "context", "tomorrow", "--budget", "700", max_lines=24)
    print("\n-- verify also checks every compaction's range and hashes against the log --")
    run(target, "verify")

    print("\n== 7. Recall anything: the cold tier searches messages, summaries and documents ==")
    run(target, "search", "why were users logged out after five minutes?", "-k", "3")
    print("\n-- summaries of compacted history are searchable too, with the records they cover --")
    run(target, "search", "webhook delivery retries", "--kind", "summary", "-k", "2")
    sources = target / ".airsspec" / "sources"
    (sources / "release-checklist.md").write_text(RELEASE_CHECKLIST)
    print(f"\n-- a document put in {sources.relative_to(target)}/ is indexed on the next query --")
    run(target, "search", "who signs off a release?", "-k", "2", "--kind", "source")
    print("\n-- ...registered by an event in the log: which documents were known, when, as what --")
    run(
        target,
        "sql",
        "SELECT seq, ts, path, size, left(sha256, 16) AS sha256 FROM events "
        "WHERE type = 'source_indexed'",
    )
    print("\n-- scripts and evaluations send many queries at once, one JSON line each --")
    run(
        target,
        "search",
        "--batch",
        "-",
        stdin='{"query": "HMAC signing", "k": 1}\n{"query": "CSV time zone", "k": 1}\n',
        max_lines=2,
        width=160,
    )
    print("\n-- with the vectors gone, a query still answers (from the log) and says so --")
    shutil.rmtree(target / ".airsspec" / "knowledge" / "vectors")
    run(target, "search", "HMAC signing", "-k", "1", "--stale")

    print("\n== 8. Any tier can be deleted; the log rebuilds it exactly, no summarizer called ==")
    run(target, "project")
    derived = [
        target / ".airsspec" / "state" / "hot",
        target / ".airsspec" / "knowledge" / "library",
    ]

    def contents() -> dict[str, bytes]:
        return {
            str(p): p.read_bytes() for d in derived for p in sorted(d.rglob("*")) if p.is_file()
        }

    before, rows_before = contents(), cold_rows(target)
    shutil.rmtree(target / ".airsspec" / "state")
    shutil.rmtree(target / ".airsspec" / "knowledge")
    print("\n(deleted .airsspec/state and .airsspec/knowledge)")
    run(target, "rebuild")
    same = before == contents()
    print(f"rebuilt hot tier and library are byte-identical to the deleted ones: {same}")
    same_rows = rows_before == cold_rows(target)
    print(f"rebuilt cold tier has the same {len(rows_before)} rows and vectors: {same_rows}")
    if not (same and same_rows):
        sys.exit("demo step failed: rebuild differs")

    print("\n== 9. Time travel: the hot tier as it was at 09:20 on 5 October ==")
    past = target.parent / "demo-as-of"
    run(target, "rebuild", "--as-of", "2026-10-05T09:20:00Z", "--out", str(past))
    run(target, "-w", str(past), "hot", "spec-rate-limiter", max_lines=6)
    print(f"(written to {past}; the live tiers are untouched)")

    print("\n== 10. SQL over the whole history (read-only), reports and charts ==")
    run(
        target,
        "sql",
        "SELECT session, records, tool_calls, errors, compactions, tokens "
        "FROM sessions ORDER BY first_ts",
    )
    run(target, "report", "tools", "--plot", str(target / "tools.png"))
    run(target, "sql", "DELETE FROM events", expect=2)
    run(target, "export", "parquet", str(target / "parquet"))
    run(
        target,
        "sql",
        "SELECT count(*) AS records FROM events",
        "--parquet",
        str(target / "parquet"),
    )

    print("\n== 11. The live daemon keeps the tiers current while an agent appends ==")
    watch_demo(target)

    shared = REPO.parent / "shared" / "data" / "claude-code"
    if shared.is_dir():
        print("\n== 12. Import a real Claude Code transcript, losslessly ==")
        import_args = (
            "import",
            "claude-code",
            str(shared / "tool_heavy.jsonl"),
            "--session-prefix",
            "cc-",
        )
        run(target, *import_args)
        run(target, "replay", "cc-tool_heavy", "--from", "4", "--until", "9", max_lines=16)
        exported = target / "exported.jsonl"
        run(target, "export", "claude-code", "cc-tool_heavy", "-o", str(exported))
        same = exported.read_bytes() == (shared / "tool_heavy.jsonl").read_bytes()
        print(f"re-exported transcript is byte-identical to the source: {same}")
        print("\n-- importing it again adds nothing --")
        run(target, *import_args)

    else:
        print(f"\n== 12. (import skipped: {shared} is absent) ==")

    print("\n== 13. Tampering is caught: change one byte in a copy and verify it ==")
    tampered = target.parent / "demo-tampered"
    shutil.rmtree(tampered, ignore_errors=True)
    shutil.copytree(target, tampered)
    log = tampered / ".airsspec/contexts/agent/spec-csv-export.jsonl"
    log.write_bytes(log.read_bytes().replace(b"100,000 invoices", b"900,000 invoices", 1))
    run(tampered, "verify", "spec-csv-export", expect=1)

    print("\n== 14. Nothing gets around the log: secrets, SQL, cuts and forgeries ==")
    leak = '{"type": "user", "content": "deploy with key AKIAQWERTYUIOPASDFGH please"}'
    run(target, "append", "ops-notes", stdin=leak)
    redacted = "SELECT content, redacted FROM events WHERE session = 'ops-notes'"
    run(target, "sql", redacted, "--format", "json")
    log = target / ".airsspec/contexts/agent/ops-notes.jsonl"
    copy = f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{log}' (FORMAT csv, USE_TMP_FILE false)"
    run(target, "sql", copy, expect=2)
    key, seal = target.parent / "demo-seal.key", target.parent / "demo-seal.json"
    key.write_bytes(bytes(range(32)))
    run(target, "seal", "--key", str(key), "-o", str(seal))
    print("\n-- cut the last record of a session: its head catches it --")
    log = target / ".airsspec/contexts/agent/spec-csv-export.jsonl"
    original = log.read_bytes()
    log.write_bytes(b"".join(original.splitlines(keepends=True)[:-1]))
    run(target, "verify", "spec-csv-export", expect=1)
    print("\n-- rewrite the head too: the seal, kept elsewhere, still catches it --")
    head = log.with_suffix(".head")
    head.unlink()
    run(target, "verify", "--against", str(seal), "--key", str(key), "spec-csv-export", expect=1)
    log.write_bytes(original)
    run(target, "verify", "--against", str(seal), "--key", str(key))
    print("\n== 15. Memory across sessions: a correction on Monday reaches Friday's prompt ==")
    run(target, "session", "start", "mon-users", "--task", "add the users endpoint")
    monday = (
        '{"type": "user", "content": "Add a users endpoint to the API."}\n'
        '{"type": "assistant", "content": "Adding it with a default export in users.ts."}\n'
        '{"type": "user", "content": "No, never use default exports. Use named exports."}\n'
    )
    run(target, "append", "mon-users", "-", stdin=monday)
    print("-- ending a session reads its new messages for learnings at once --")
    run(target, "session", "end", "mon-users")
    run(target, "learnings", "list", "--session", "fri-orders", max_lines=8, width=150)
    run(target, "session", "start", "fri-orders", "--task", "write the orders module")
    print("\n-- Friday's context starts with its task, phase, anchors and what was learned --")
    run(target, "context", "fri-orders", "--budget", "600", max_lines=16, width=150)
    print("\n-- health: capacity per tier, pending moves, conflicts, lag (exit 1: look) --")
    run(target, "project")
    run(target, "health", expect=None)

    print("\n== 16. An MCP client (the official SDK) asks the memory over stdio ==")
    asyncio.run(mcp_demo(target))

    print("\n== 17. One warm process: airsspec serve for agents, hooks and people ==")
    serve_demo(target)

    print("\n== 18. Forget a user: every copy under the workspace goes, the log still verifies ==")
    forget_demo(target.parent / "demo-private")

    print("\n== 19. Beyond one machine: two machines share one log on an S3 bucket ==")
    bucket_demo(target.parent / "demo-bucket")

    print("\n== 20. Trust: a name is never a path, a cloned repository's code never runs ==")
    trust_demo(target.parent / "demo-private")

    print("\n== 21. Claude's memory tool on the log: versions with actors, then forgotten ==")
    claude_memory_demo(target.parent / "demo-claude-memory")
    print("\n== 22. What the next session knows: facts that hold, and what they replaced ==")
    facts_demo(target)
    print(f"\nDemo workspace: {target} (delete it at will; the example stays untouched)")


if __name__ == "__main__":
    main()

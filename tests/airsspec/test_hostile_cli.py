"""Input that must be refused, not stored, driven through the real command line: each refusal is
one ``airsspec: error:`` line (or a line naming file and line), exit 2, and the workspace exactly
as it was; what was stored before a limit existed stays readable by every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventlog.canonical import encode_batch
from eventlog.exact_json import MAX_DEPTH
from eventlog.schema import SCHEMA_VERSION
from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}
GITHUB = "ghp_" + "Zq8Lm2Rt5Vw9Xy3Bn6Cd1Fg4Hj7Kp0Ts2Uv5"
ESCAPES = "\x1b]0;owned\x07\x1b[2J title changed"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    return tmp_path


def workspace(project: Path) -> Path:
    return project / ".airsspec"


def logs(project: Path) -> Path:
    return workspace(project) / "contexts" / "agent"


def append(project: Path, session: str, *events: dict, **kw):
    lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
    return run_cli("append", session, cwd=project, stdin=lines.encode(), **kw)


def user(content: str, **fields) -> dict:
    return {"type": "user", "content": content, **fields}


def nested(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def transcript(path: Path, *contents: str) -> bytes:
    data = "".join(
        json.dumps(
            {
                "type": "user",
                "message": {"role": "user", "content": c},
                "timestamp": f"2026-01-01T00:00:0{i}Z",
            },
            ensure_ascii=False,
        )
        + "\n"
        for i, c in enumerate(contents)
    ).encode()
    path.write_bytes(data)
    return data


def refused(result, *needles: str) -> str:
    """The one error of a refused command (exit 2, no traceback), checked for ``needles``."""
    err = result.stderr.decode()
    assert result.returncode == 2, (result.stdout, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


# --------------------------------------------------------------------------- nesting


def test_append_refuses_nesting_past_the_limit_and_the_log_is_unchanged(project: Path) -> None:
    assert append(project, "s", user("before")).returncode == 0
    before = snapshot(workspace(project))
    result = append(project, "s", user("fine"), user("deep", meta=nested(300)))
    refused(result, "<stdin>:2:", f"more than {MAX_DEPTH} levels deep")
    assert snapshot(workspace(project)) == before


def test_import_refuses_a_transcript_line_nested_past_the_limit(project: Path) -> None:
    path = project / "deep.jsonl"
    line = {"type": "user", "message": {"role": "user", "content": "x"}, "extra": nested(250)}
    path.write_text(
        json.dumps({"type": "user", "message": {"content": "ok"}}) + "\n" + json.dumps(line) + "\n"
    )
    before = snapshot(workspace(project))
    refused(run_cli("import", "claude-code", str(path), cwd=project), "deep.jsonl:2", "levels deep")
    assert snapshot(workspace(project)) == before


def test_a_deep_record_stored_before_the_limit_is_read_by_every_command(project: Path) -> None:
    bodies = [user("deep one", meta=nested(230)), user("after it")]
    _, data, _ = encode_batch(
        bodies, SCHEMA_VERSION, "old", 0, "2026-01-01T00:00:00.000000Z", ["i1", "i2"], None
    )
    (logs(project) / "old.jsonl").write_bytes(data)
    for args in (
        ["verify"],
        ["replay", "old"],
        ["seal"],
        ["hot", "old"],
        ["context", "old", "--budget", "500"],
    ):
        result = run_cli(*args, cwd=project, env=HASH)
        assert result.returncode == 0, (args, result.stderr)
        assert b"Traceback" not in result.stderr
    assert b"after it" in run_cli("replay", "old", cwd=project).stdout
    assert b"levels deep" in run_cli("verify", cwd=project).stderr


# --------------------------------------------------------------------------- secrets


def test_a_session_id_shaped_like_a_secret_is_refused(project: Path) -> None:
    assert append(project, "s", user("before")).returncode == 0
    before = snapshot(workspace(project))
    err = refused(append(project, GITHUB, user("x")), "looks like a secret")
    assert GITHUB not in err
    assert snapshot(workspace(project)) == before


def test_a_token_is_redacted_whole_everywhere(project: Path) -> None:
    result = append(project, "s", user(f"push with {GITHUB} please"))
    assert result.returncode == 0, result.stderr
    stored = (logs(project) / "s.jsonl").read_bytes()
    assert GITHUB[4:].encode() not in stored and b"[REDACTED:github-token:" in stored


def test_a_secret_in_a_source_document_is_never_indexed(project: Path) -> None:
    (workspace(project) / "sources" / "deploy.md").write_text(
        f"# Deploy\n\nThe zanzibar token is {GITHUB} for the quokka bot.\n"
    )
    assert append(project, "s", user("something else")).returncode == 0
    result = run_cli("query", "zanzibar quokka token", "--json", cwd=project, env=HASH)
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)["hits"]
    assert any(h["source"] == "deploy.md" and "[REDACTED:github-token:" in h["text"] for h in hits)
    assert GITHUB[4:].encode() not in result.stdout
    for path in (workspace(project) / "knowledge").rglob("*"):
        if path.is_file():
            assert GITHUB[4:].encode() not in path.read_bytes(), path
    for path in (workspace(project) / "state").rglob("*"):
        if path.is_file():
            assert GITHUB[4:].encode() not in path.read_bytes(), path


# --------------------------------------------------------------------------- outputs


@pytest.mark.parametrize("via_link", [False, True])
@pytest.mark.parametrize("command", ["seal", "export"])
def test_an_output_inside_the_workspace_is_refused(
    project: Path, command: str, via_link: bool
) -> None:
    source = project / "t.jsonl"
    transcript(source, "hello")
    assert run_cli("import", "claude-code", str(source), cwd=project).returncode == 0
    target = logs(project) / "t.jsonl"
    if via_link:
        link = project / "innocent.json"
        link.symlink_to(target)
        target = link
    before = snapshot(workspace(project))
    args = (
        ["seal", "-o", str(target)]
        if command == "seal"
        else ["export", "claude-code", "t", "-o", str(target)]
    )
    refused(run_cli(*args, cwd=project), "inside the workspace")
    assert snapshot(workspace(project)) == before


@pytest.mark.parametrize(
    "args",
    [
        ["export", "parquet", ".airsspec/state/pq"],
        ["rebuild", "--as-of", "1", "--out", ".airsspec/knowledge/past"],
        ["reextract", "--out", ".airsspec/knowledge/again"],
    ],
)
def test_every_output_option_refuses_the_workspace(project: Path, args: list[str]) -> None:
    assert append(project, "s", user("hello")).returncode == 0
    before = snapshot(workspace(project))
    refused(run_cli(*args, cwd=project, env=HASH), "inside the workspace")
    assert snapshot(workspace(project)) == before


def test_an_output_outside_the_workspace_is_written(project: Path) -> None:
    assert append(project, "s", user("hello")).returncode == 0
    result = run_cli("seal", "-o", str(project / "seal.json"), cwd=project)
    assert result.returncode == 0, result.stderr
    assert json.loads((project / "seal.json").read_text())["sessions"]


# --------------------------------------------------------------------------- import identity


def test_one_file_named_twice_is_imported_once(project: Path) -> None:
    source = project / "twice.jsonl"
    transcript(source, "one", "two")
    result = run_cli(
        "import", "claude-code", str(source), "./twice.jsonl", str(project), "--json", cwd=project
    )
    assert result.returncode == 0, result.stderr
    assert [r["appended"] for r in json.loads(result.stdout)] == [2]
    replay = run_cli("replay", "twice", "--json", cwd=project).stdout.splitlines()
    assert len(replay) == 2


def test_a_hand_written_origin_is_refused_on_append(project: Path) -> None:
    origin = {
        "format": "claude-code",
        "source": "x.jsonl",
        "index": 0,
        "sha256": "0" * 64,
        "text": "{}",
    }
    before = snapshot(workspace(project))
    refused(
        append(project, "x", user("forged", origin=origin)), "field 'origin'", "airsspec import"
    )
    assert snapshot(workspace(project)) == before


# --------------------------------------------------------------------------- reserved names


@pytest.mark.parametrize("session", ["AIRSSPEC.MEMORY", "Airsspec.Memory", "airsspec.memory"])
def test_a_variant_of_the_reserved_session_is_refused_and_learnings_still_work(
    project: Path, session: str
) -> None:
    before = snapshot(workspace(project))
    refused(append(project, session, user("x")), "airsspec.memory")
    assert snapshot(workspace(project)) == before
    added = run_cli("learnings", "add", "always run the tests first", cwd=project)
    assert added.returncode == 0, added.stderr


# --------------------------------------------------------------------------- times


def test_an_early_year_is_stored_padded_and_query_works(project: Path) -> None:
    result = append(project, "s", user("the ancient quokka", ts="0999-01-01T00:00:00Z"))
    assert result.returncode == 0, result.stderr
    assert b'"ts":"0999-01-01T00:00:00.000000Z"' in (logs(project) / "s.jsonl").read_bytes()
    query = run_cli("query", "ancient quokka", "--json", cwd=project, env=HASH)
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["hits"][0]["ts"] == "0999-01-01T00:00:00.000000Z"


# --------------------------------------------------------------------------- line separators


def test_a_transcript_with_unicode_line_separators_imports(project: Path) -> None:
    source = project / "sep.jsonl"
    data = transcript(source, "a\u2028b\u2029c\x85d", "next")
    result = run_cli("import", "claude-code", str(source), "--keep-secrets", cwd=project)
    assert result.returncode == 0, result.stderr
    exported = run_cli("export", "claude-code", "sep", cwd=project)
    assert exported.stdout == data


# --------------------------------------------------------------------------- -c and -w


def test_config_and_workspace_naming_different_workspaces_is_an_error(tmp_path: Path) -> None:
    for name in ("A", "B"):
        init_workspace(tmp_path / name)

    def append_with(workspace: str):
        return run_cli(
            *("-c", "B/airsspec.toml", "-w", workspace, "append", "s"),
            cwd=tmp_path,
            stdin=json.dumps(user("x")).encode(),
        )

    before = snapshot(tmp_path)
    refused(append_with("A/.airsspec"), "-w A/.airsspec", "-c B/airsspec.toml", "different")
    assert snapshot(tmp_path) == before
    same = append_with("B/.airsspec")
    assert same.returncode == 0, same.stderr
    assert (tmp_path / "B" / ".airsspec" / "contexts" / "agent" / "s.jsonl").exists()
    assert not (tmp_path / "A" / ".airsspec" / "contexts" / "agent" / "s.jsonl").exists()


# --------------------------------------------------------------------------- terminal escapes


def test_stored_escape_sequences_are_shown_escaped_in_text_and_exact_in_json(
    project: Path,
) -> None:
    assert (
        append(
            project, "s", user(ESCAPES), {"type": "assistant", "content": "b\u202eack"}
        ).returncode
        == 0
    )
    for args in (
        ["replay", "s"],
        ["hot", "s"],
        ["context", "s", "--budget", "500"],
        ["query", "title changed"],
    ):
        out = run_cli(*args, cwd=project, env=HASH)
        assert out.returncode == 0, (args, out.stderr)
        assert b"\x1b" not in out.stdout and b"\x07" not in out.stdout, args
        assert b"\\x1b]0;owned\\x07\\x1b[2J" in out.stdout, args
    replay = run_cli("replay", "s", cwd=project).stdout.decode()
    assert "\u202e" not in replay and "b\\u202eack" in replay
    exact = run_cli("replay", "s", "--json", cwd=project).stdout.splitlines()
    assert json.loads(exact[0])["content"] == ESCAPES


# --------------------------------------------------------------------------- MCP


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (user("deep", meta=nested(300)), f"field 'meta': nested more than {MAX_DEPTH} levels"),
        (
            user(
                "forged",
                origin={
                    "format": "claude-code",
                    "source": "x",
                    "index": 0,
                    "sha256": "0" * 64,
                    "text": "{}",
                },
            ),
            "field 'origin': set only by 'airsspec import'",
        ),
    ],
)
def test_the_mcp_append_tool_refuses_what_append_refuses(
    project: Path, event: dict, expected: str
) -> None:
    import asyncio

    from mcp.server.mcpserver.exceptions import ToolError

    from airsspec.mcp_server import build_server
    from airsspec.memory import Memory

    before = snapshot(workspace(project))
    with Memory.open(project) as memory:
        server = build_server(lambda op, arguments, ctx: op.call(memory, arguments))
        with pytest.raises(ToolError, match=expected.replace("(", r"\(")):
            asyncio.run(server.call_tool("append", {"session": "s", "events": [event]}))
    assert snapshot(workspace(project)) == before

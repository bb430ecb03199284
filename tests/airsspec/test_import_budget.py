"""What each everyday command imports: a command pays only for what it uses.

Each command runs in a fresh interpreter, as a person or a script runs it (``python -m
airsspec``, no server); afterwards the modules it loaded are compared with its budget: the
heavy libraries it must not import (the vector store, DuckDB, the HTTP stack, the embedder,
cryptography, the Anthropic SDK), and a ceiling on the number of modules with headroom (about a
fifth over what it loads now), so a new eager import anywhere on its path is noticed here
rather than as a slower command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from airsspec.cli import SECTIONS
from tests.conftest import REPO
from tests.support.cli import run_cli

# Libraries each costs from tens of milliseconds to seconds to import.
HEAVY = (
    "lancedb",
    "pyarrow",
    "duckdb",
    "cryptography",
    "httpx",
    "starlette",
    "uvicorn",
    "mcp",
    "anthropic",
    "torch",
    "sentence_transformers",
    "numpy",
)

# Runs the command as ``python -m airsspec`` does, then writes the loaded modules to the file
# named by its first argument.
RUNNER = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["airsspec", *sys.argv[2:]]
try:
    runpy.run_module("airsspec", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    code = exit.code
with open(out, "w") as file:
    json.dump({"code": code, "modules": sorted(sys.modules)}, file)
"""


def loaded_by(root: Path, *args: str, stdin: bytes = b"") -> tuple[int, set[str]]:
    """Run ``airsspec -w root ARGS`` in a fresh interpreter: its exit code and the modules
    it had imported when it finished."""
    out = root / "modules.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AIRSSPEC_NO_SERVER": "1",
        "AIRSSPEC_COLD_EMBEDDER": "hash",
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(out), "-w", str(root / ".airsspec"), *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=root,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    data = json.loads(out.read_text())
    out.unlink()
    assert data["code"] in (0, None), done.stderr.decode()
    return data["code"] or 0, set(data["modules"])


def heavy(modules: set[str]) -> list[str]:
    """The heavy libraries (or their submodules) among ``modules``."""
    return sorted(h for h in HEAVY if h in modules or any(m.startswith(h + ".") for m in modules))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with one session, every tier projected once (the cold one by the hash
    embedder: no model is loaded)."""
    root = tmp_path_factory.mktemp("budget")
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "AIRSSPEC_NO_SERVER": "1"}
    for args, stdin in (
        (("init",), None),
        (("append", "s1"), b'{"type": "user", "content": "add rate limiting"}\n'),
        (("project",), None),
    ):
        done = run_cli(*args, cwd=root, stdin=stdin, env=env)
        assert done.returncode == 0, done.stderr
    (root / "event.jsonl").write_text('{"type": "user", "content": "one more"}\n')
    return root


# (arguments, standard input, the module ceiling): ceilings about a tenth over the count
# measured when set (settings built section by section, numpy, pyarrow and importlib.metadata
# imported by what uses them: 162, 348, 313, 280 and 351 modules; were 318-362 before them;
# append 340 once its hot fold counts no token; sessions 213 once it imports no pydantic).
BUDGETS = [
    (("--version",), b"", 180),
    (("append", "s1", "event.jsonl"), b"", 375),
    (("append", "s1", "-"), b'{"type": "user", "content": "from stdin"}\n', 375),
    (("replay", "s1"), b"", 345),
    (("sessions",), b"", 235),
    (("context", "s1", "--budget", "500"), b"", 385),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "stdin", "ceiling"), BUDGETS, ids=[" ".join(b[0][:1] + b[0][2:]) for b in BUDGETS]
)
def test_a_command_imports_no_heavy_library_and_stays_under_its_module_ceiling(
    workspace: Path, args: tuple[str, ...], stdin: bytes, ceiling: int
) -> None:
    _, modules = loaded_by(workspace, *args, stdin=stdin)
    assert heavy(modules) == []
    assert len(modules) <= ceiling, f"{args[0]} imports {len(modules)} modules"


# The pydantic models of ours an everyday command never needs: the settings sections (the file
# ``init`` writes is read without them: ``airsspec.config``), the projections' tunables, the
# query model (imported when a search is made).
MODELS = ("airsspec.settings", "projections.policies", "projections.memory_tool")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "stdin"), [b[:2] for b in BUDGETS], ids=[" ".join(b[0][:1]) for b in BUDGETS]
)
def test_a_command_imports_none_of_our_models(
    workspace: Path, args: tuple[str, ...], stdin: bytes
) -> None:
    _, modules = loaded_by(workspace, *args, stdin=stdin)
    assert sorted(set(MODELS) & modules) == []


# An append of everyday messages counts no token: the hot window keeps a message within the cap
# by its bytes uncounted (``projections.hot``), so its fold never builds a counter; nor does
# the context of a short session, whose texts fit the budget by their bytes (``Tally``), and
# the default encoding is not looked up in tiktoken's plugins (``projections.tokens``).
UNCOUNTED = [b for b in BUDGETS if b[0][0] in ("append", "context")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "stdin"), [b[:2] for b in UNCOUNTED], ids=[" ".join(b[0]) for b in UNCOUNTED]
)
def test_an_append_or_a_short_context_loads_no_tokenizer(
    workspace: Path, args: tuple[str, ...], stdin: bytes
) -> None:
    _, modules = loaded_by(workspace, *args, stdin=stdin)
    assert "tiktoken" not in modules


@pytest.mark.slow
def test_sessions_builds_no_validator(workspace: Path) -> None:
    """``sessions`` reads the log's heads and validates nothing: no settings section, record
    or tool model builds its validator, so pydantic's plugin lookup (``importlib.metadata``,
    which scans every installed distribution) never runs."""
    _, modules = loaded_by(workspace, "sessions")
    assert "pydantic.plugin._loader" not in modules
    assert "importlib.metadata" not in modules


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("sessions",),
        ("context", "s1", "--budget", "500"),
        ("replay", "s1"),
        ("replay", "s1", "--json"),
        ("append", "s1", "event.jsonl"),
    ],
)
def test_a_reading_command_imports_no_pydantic(workspace: Path, args: tuple[str, ...]) -> None:
    """``sessions``, and ``context`` of a workspace kept up, read the log's heads and the
    tiers' files; ``replay`` shows the stored dicts the emitted checks accept
    (``eventlog.plain``): the event catalog (pydantic's models) is imported only where a
    record is folded or made (the commands above append: the tiers are kept up first)."""
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "AIRSSPEC_NO_SERVER": "1"}
    assert run_cli("project", cwd=workspace, env=env).returncode == 0
    _, modules = loaded_by(workspace, *args)
    assert "pydantic" not in modules
    assert "eventlog.schema" not in modules


@pytest.mark.slow
def test_a_context_after_an_append_imports_no_pydantic(workspace: Path) -> None:
    """An append folds only the hot window; the context after it folds the rest (the gate's
    owners, the library) from the stored dicts (``Fold.plain``), making no model."""
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "AIRSSPEC_NO_SERVER": "1"}
    added = run_cli(
        "append", "s1", "-", cwd=workspace, env=env, stdin=b'{"type": "user", "content": "x"}\n'
    )
    assert added.returncode == 0, added.stderr
    _, modules = loaded_by(workspace, "context", "s1", "--budget", "500")
    assert "pydantic" not in modules
    assert "eventlog.schema" not in modules


@pytest.mark.slow
def test_version_imports_neither_the_facade_nor_a_command(workspace: Path) -> None:
    _, modules = loaded_by(workspace, "--version")
    commands = {f"airsspec.cli.{name}" for _, names in SECTIONS for name in names}
    assert not [m for m in modules if m.startswith("airsspec.memory") or m in commands]
    assert "pydantic" not in modules


@pytest.mark.slow
def test_status_imports_no_heavy_library(workspace: Path) -> None:
    """Not the HTTP stack, DuckDB or a model, and not pyarrow or numpy either: the tiers it
    lists import them when they read or write their files (the tokens tier's Parquet, the
    cold tier's vectors), not when they are counted."""
    _, modules = loaded_by(workspace, "status")
    assert heavy(modules) == []
    assert len(modules) <= 420, f"status imports {len(modules)} modules"  # 366 when set


@pytest.mark.slow
def test_status_reads_the_cold_tier_without_lance(workspace: Path) -> None:
    """The cold tier's epoch and row count come from the record of its files (``TableFiles``),
    taken when it was last projected; the figures are Lance's own."""
    from airsspec.memory import Memory

    hashed = {"AIRSSPEC_COLD_EMBEDDER": "hash"}
    done = run_cli("status", "--json", cwd=workspace, env=hashed)
    _, modules = loaded_by(workspace, "status")
    assert "lancedb" not in modules
    with (
        mock.patch.dict(os.environ, hashed),
        Memory.open_workspace(workspace / ".airsspec") as memory,
    ):
        (cold,) = [p for p in memory.workspace.projectors() if p.name == "cold"]
        assert cold.store.rows() > 0
        shown = [t for t in json.loads(done.stdout)["tiers"] if t["tier"] == "cold"]
    assert [t["items"] for t in shown] == [cold.store.rows()]


def test_the_facade_names_each_lazy_name_as_type_checkers_see_it() -> None:
    """``airsspec.memory`` imports a name on first use from the module its ``TYPE_CHECKING``
    block names (what mypy sees), and every exported name resolves."""
    import ast

    import airsspec.memory as facade

    tree = ast.parse(Path(facade.__file__ or "").read_text())
    (block,) = [
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
    ]
    seen = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == facade._LAZY
    for name in facade.__all__:
        assert getattr(facade, name) is not None, name


@pytest.mark.slow
def test_a_command_imports_its_own_command_module_not_the_others(workspace: Path) -> None:
    """The parser of a run holds the commands up to the one named: ``sessions`` (in
    ``airsspec.cli.log``) loads no other command module; an unknown name loads them all, so
    the error lists every command."""
    _, modules = loaded_by(workspace, "sessions")
    commands = {f"airsspec.cli.{name}" for _, names in SECTIONS for name in names}
    assert sorted(commands & modules) == ["airsspec.cli.log"]
    wrong = run_cli("sesions", cwd=workspace)
    assert wrong.returncode == 2 and b"'sessions'" in wrong.stderr and b"'serve'" in wrong.stderr


@pytest.mark.slow
def test_search_reads_the_cold_tier_without_lancedb(workspace: Path) -> None:
    """A search of a tier kept up reads the table with pylance (``projections.cold_read``):
    lancedb, whose import is most of a second (its namespace client's pydantic models), is
    imported only to write the table (the commands above append: the tier is kept up first)."""
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "AIRSSPEC_NO_SERVER": "1"}
    assert run_cli("project", cwd=workspace, env=env).returncode == 0
    _, modules = loaded_by(workspace, "search", "rate limiting")
    assert "lance" in modules  # the table was read
    assert not [m for m in modules if m.split(".")[0] in ("lancedb", "lance_namespace")]

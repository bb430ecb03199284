"""The docs run and cannot drift. Every example of the README and of ``docs/`` (each ```sh and
```python block, the pages in the order of ``mkdocs.yml``'s nav, each page's blocks in order)
runs as written in one scratch project seeded with the example workspace's sessions; a block
whose first line says it is not run, because it calls a paid API, is the only exception. The
reference under ``docs/reference/`` is what ``scripts/reference.py`` makes of the parsers, the
settings and the operations: a command, option, setting or route added without regenerating it
fails here, naming the command that does."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO
from tests.support.cli import run_cli
from tests.support.forkserver import airsspec_on_path

BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.S | re.M)
NOT_RUN = "not run by the README test"
NAV_PAGE = re.compile(r":\s*(\S+\.md)\s*$", re.M)


def pages() -> list[Path]:
    """The README, then the pages of the site's nav in their order."""
    nav = NAV_PAGE.findall((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    return [REPO / "README.md", *(REPO / "docs" / page for page in nav)]


def blocks() -> list[tuple[str, str, str]]:
    """(page, language, code) of every example to run."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(REPO))
        found += [
            (name, lang, body) for lang, body in BLOCK.findall(text) if NOT_RUN not in body[:200]
        ]
    return found


def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", REPO / "scripts" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_is_in_the_nav_and_has_examples_to_run() -> None:
    listed = {p.name for p in pages()[1:]} | {
        p.name for p in (REPO / "docs" / "reference").iterdir()
    }
    written = {p.name for p in (REPO / "docs").rglob("*.md")}
    assert written <= listed, f"pages missing from mkdocs.yml's nav: {written - listed}"
    kinds = [lang for _, lang, _ in blocks()]
    assert kinds.count("sh") >= 10 and kinds.count("python") >= 2


def test_the_reference_is_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_new_option_or_route_without_its_entry_fails_the_check(monkeypatch) -> None:
    module = reference()
    assert module.main(["--check"]) == 0
    real = module.build_parser

    def with_an_option() -> argparse.ArgumentParser:
        parser = real()
        parser.add_argument("--brand-new", help="an option nobody documented")
        return parser

    monkeypatch.setattr(module, "build_parser", with_an_option)
    assert "--brand-new" in module.cli_page()
    assert module.main(["--check"]) == 1
    monkeypatch.setattr(module, "build_parser", real)
    op = module.OPS[0]
    monkeypatch.setattr(module, "OPS", (*module.OPS, type(op)(op.fn, True, "GET", "/brand/new")))
    assert module.main(["--check"]) == 1


def test_a_hook_event_or_input_field_without_its_entry_fails_the_reference(monkeypatch) -> None:
    module = reference()
    assert "| `SessionEnd` |" in module.hooks_page() and "`reason`" in module.hooks_page()
    monkeypatch.setattr(module, "EVENTS", (*module.EVENTS, "BrandNewEvent"))
    with pytest.raises(SystemExit, match="BrandNewEvent"):
        module.hooks_page()
    monkeypatch.setattr(module, "EVENTS", module.EVENTS[:-1])
    monkeypatch.setattr(module, "READS", {**module.READS, "Stop": ("session_id", "new_field")})
    with pytest.raises(SystemExit, match="new_field"):
        module.hooks_page()


def test_every_hook_input_field_the_code_reads_is_in_the_hooks_table() -> None:
    """The fields of the hook input the code reads (``payload.get("X")``, ``payload["X"]``,
    ``_transcript(payload, "X")``), found in the source, are each in ``INPUT``: the generated
    reference cannot miss one the code reads."""
    import ast

    from airsspec.hooks.events import INPUT, READS

    read: set[str] = set()
    for path in [*(REPO / "airsspec" / "hooks").glob("*.py"), REPO / "airsspec/serve/api.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(
                isinstance(a, ast.Name) and a.id == "payload" for a in node.args
            ):
                read |= {a.value for a in node.args if isinstance(a, ast.Constant)}
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "payload"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                read.add(node.args[0].value)
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id == "payload"
                and isinstance(node.slice, ast.Constant)
            ):
                read.add(node.slice.value)
    read |= set(__import__("airsspec.serve.api", fromlist=["SERVER_FILES"]).SERVER_FILES)
    assert {"session_id", "prompt", "reason", "source"} <= read  # the scan finds them
    assert read <= set(INPUT), f"read but not in the hooks' INPUT table: {read - set(INPUT)}"
    assert set(INPUT) - {"hook_event_name"} == {f for fields in READS.values() for f in fields}


EXTRA_SPELLING = re.compile(r"pip install (-e )?'([^'\[]*)\[([a-z0-9,-]+)\]'")


def test_extras_are_named_one_way_everywhere() -> None:
    """An extra is installed as ``pip install 'airsspec-memory[NAME]'`` (the distribution's
    name) in the README, docs, error messages and skip reasons; only the checkout's own
    developer extras (dev, docs) are installed editable from ``.``. Every extra named exists."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = set(project["optional-dependencies"])
    assert project["name"] == "airsspec-memory"
    roots = ["README.md", "docs", "airsspec", "eventlog", "projections", "compactor", "scripts"]
    files = [REPO / r for r in roots if (REPO / r).is_file()]
    files += [p for r in roots for p in (REPO / r).rglob("*") if p.suffix in (".py", ".md")]
    files += list((REPO / "tests").rglob("*.py"))
    seen = []
    for path in files:
        for editable, dist, extras in EXTRA_SPELLING.findall(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(REPO)}: pip install {editable}'{dist}[{extras}]'"
            seen.append(where)
            assert set(extras.split(",")) <= declared, where
            if editable:
                assert dist == "." and set(extras.split(",")) <= {"dev", "docs"}, where
            else:
                assert dist == "airsspec-memory", where
    assert len(seen) >= 8  # not vacuous


@pytest.mark.slow
def test_every_example_runs_as_written(tmp_path: Path) -> None:
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    shutil.copytree(
        REPO / ".airsspec-example" / "contexts",
        tmp_path / ".airsspec" / "contexts",
        dirs_exist_ok=True,
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRSSPEC_COLD_EMBEDDER": "hash",  # the examples' point is the calls, not the model
        "PYTHONPATH": str(REPO),
    }
    # ``airsspec`` runs each command in a process of its own, forked from one that imported the
    # CLI once (the installed entry point is tested by tests/test_install.py); so does each
    # Python example.
    with airsspec_on_path(tmp_path.parent / f"{tmp_path.name}-bin", env) as folder:
        env["PATH"] = f"{folder}{os.pathsep}{env['PATH']}"
        _run_blocks(tmp_path, env, folder / "python-example")


def _run_blocks(tmp_path: Path, env: dict[str, str], python: Path) -> None:
    """Each block in order: a shell block in ``bash``, a Python one as ``python -c`` runs it
    (``python``: forked, as the commands are, from a process that imported the project)."""
    for number, (page, lang, body) in enumerate(blocks(), start=1):
        command = ["bash", "-euo", "pipefail", "-c", body] if lang == "sh" else [str(python), body]
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, (
            f"{page}, block {number} ({lang}):\n{body}\n{done.stderr[-3000:]}"
        )
        assert "Traceback" not in done.stderr, body

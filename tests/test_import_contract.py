"""The import contract of ``pyproject.toml`` holds: the doors (CLI, MCP server, hooks, server,
daemon) reach the project only through ``airsspec.memory`` and ``airsspec.errors``, and no
package imports one above it (eventlog < projections < compactor < airsspec). Every module of
``airsspec`` is placed in the contract, so a new one cannot slip past it unclassified."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO

FACADE = {"airsspec.memory", "airsspec.errors"}
ENTRY = {"airsspec.__init__", "airsspec.__main__"}  # the package itself and `python -m airsspec`


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def test_every_airsspec_module_is_a_door_the_facade_or_forbidden_to_the_doors() -> None:
    doors = _contracts()["doors"]
    placed = set(doors["source_modules"]) | set(doors["forbidden_modules"]) | FACADE | ENTRY
    modules = {
        f"airsspec.{path.stem if path.is_file() else path.name}"
        for path in (REPO / "airsspec").iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").exists())
    }
    assert modules - placed == set(), "place these in [tool.importlinter] of pyproject.toml"
    assert FACADE.isdisjoint(doors["forbidden_modules"])


def test_the_import_contract_holds() -> None:
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command as c; c()",
            "--no-cache",
            "--no-logo",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Contracts: 5 kept, 0 broken." in done.stdout


def _cycles(graph: object, modules: set[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module) & modules:  # type: ignore[attr-defined]
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_among_airsspec_modules() -> None:
    """Services take a kernel and the facade composes them: no module of ``airsspec`` imports,
    however indirectly, one that imports it back (imports for type checking alone aside)."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (dev extra)")
    graph = grimp.build_graph("airsspec", exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if m.startswith("airsspec")}
    assert len(modules) > 20
    assert _cycles(graph, modules) == []

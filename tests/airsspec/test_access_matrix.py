"""The access matrix of ``airsspec serve``: every operation of ``ops.OPS``, through each door
(HTTP ``/v1``, MCP over HTTP), as each kind of principal (admin, user, another user, a
read-only token, no token), on each kind of target (the caller's own session, another user's,
one written with no user, the workspace's own log, a global learning), answers as one declared
matrix says (``access_cases.expected``), never leaks another user's text, and grows the log
only where a write is allowed.

One workspace and one in-process server for the module (no background work, so only the cell
under test writes). The exhaustive loop names every cell; the property test draws runs of
cells in any order (fixed seeds under the CI profile), so no cell depends on the ones before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airsspec.memory import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served
from tests.airsspec import access_cases as ac


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
        root: Path = tmp_path_factory.mktemp("matrix")
        with Memory.open(root, create=True) as memory:
            served = Served(memory, local_user="owner", background=False)
            with serving(served) as where:
                yield ac.build(memory, where["url"], served.local_token)


CELLS = ac.cells()


@pytest.mark.parametrize("cell", CELLS, ids=["-".join(c) for c in CELLS])
def test_every_cell_answers_as_the_matrix_declares(world, cell) -> None:
    ac.check(world, *cell)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(CELLS), min_size=1, max_size=6))
def test_any_run_of_operations_keeps_the_matrix(world, run) -> None:
    for cell in run:
        ac.check(world, *cell)

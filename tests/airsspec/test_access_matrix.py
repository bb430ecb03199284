"""The access matrix of ``airsspec serve``: every operation of ``ops.OPS``, through each door
(HTTP ``/v1``, MCP over HTTP), as each kind of principal (admin, user, another user, a
read-only token, no token), on each kind of target (the caller's own session, another user's,
one written with no user, the workspace's own log, a global learning), answers as one declared
matrix says (``access_cases.expected``), never leaks another user's text, and grows the log
only where a write is allowed. The viewer's door, whose pages are reads only, is checked page
by page for each user principal.

One workspace and one in-process server for the module (no background work, so only the cell
under test writes). The exhaustive loop names every cell; the property test draws runs of
cells in any order (fixed seeds under the CI profile), so no cell depends on the ones before.
"""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
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


VIEWER_PAGES = ("/", "/learnings", "/verify", "/search?q=canary+plan", "/search?q=canary+reason")


@pytest.mark.parametrize("principal", ["user", "other", "read_only"])
def test_the_viewer_shows_a_user_its_own_and_the_teams_and_nothing_of_another(
    world, principal: str
) -> None:
    """The viewer's door: signed in by its own form, every page a user reaches holds its own
    and the team's records and none of the other user's; the other user's session page is
    answered as a missing one; browsing appends nothing."""
    before = ac.log_size(world.log_dir)
    hidden = ac.CANARY[ac.foreign(principal)]
    with httpx.Client(base_url=world.url, timeout=120) as browser:
        token = world.tokens[principal]
        signed = browser.post("/login", data={"token": token}, headers={"Origin": world.url})
        assert signed.status_code == 303, signed.text
        pages = {path: browser.get(path) for path in VIEWER_PAGES}
        for name in ("own", "unowned", "workspace"):
            session = ac.target_session(principal, name)
            pages[f"/sessions/{session}"] = browser.get(f"/sessions/{session}")
        theirs = browser.get(f"/sessions/{ac.SESSION[ac.foreign(principal)]}")
        missing = browser.get(f"/sessions/{ac.ABSENT}")
    for path, page in pages.items():
        assert page.status_code == 200, (path, page.text[:300])
        assert hidden not in page.text, f"{hidden} on {path}"
    assert ac.SESSION["team"] in pages["/"].text  # the team's session is listed
    assert theirs.status_code == missing.status_code == 404
    assert ac.foreign(principal) not in theirs.text.replace(ac.SESSION[ac.foreign(principal)], "")
    assert ac.log_size(world.log_dir) == before

"""Fixtures of the server's tests: a served memory (each module gives its own ``memory``)."""

from __future__ import annotations

import pytest

from airsspec.memory import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served


@pytest.fixture
def server(memory: Memory):
    """(url, served) of a server with no background work (each test drives what it needs)."""
    served = Served(memory, local_user="owner", background=False)
    with serving(served) as where:
        yield where["url"], served

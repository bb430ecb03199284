"""A bucket configured without the s3 extra installed is one clear error naming the extra, not
an ImportError's traceback, and the command changes nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli


def test_a_bucket_without_the_s3_extra_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init_workspace(tmp_path)
    with (tmp_path / "airsspec.toml").open("a") as config:
        config.write('\n[storage]\nurl = "s3://bucket-one/prefix"\n')
    before = snapshot(tmp_path)
    for name in [m for m in sys.modules if m == "obstore" or m.startswith("obstore.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("eventlog.storage.objects", "eventlog.storage.lease"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "obstore", None)  # what an uninstalled package imports as
    done = run_cli("sessions", cwd=tmp_path)
    err = done.stderr.decode()
    assert done.returncode != 0
    assert err == "airsspec: error: a bucket ([storage] url) needs the s3 extra: " + (
        "pip install 'airsspec-memory[s3]'\n"
    )
    assert snapshot(tmp_path) == before


def test_a_listing_that_fails_as_its_pages_are_read_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("obstore", reason="obstore is not installed (the s3 extra)")
    from eventlog.errors import StorageError
    from eventlog.storage.objects import ObjectStore

    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}.items():
        monkeypatch.setenv(name, value)
    store = ObjectStore("s3://bucket/p", tmp_path, endpoint="http://127.0.0.1:1", region="x")
    with pytest.raises(StorageError, match=r"^s3://bucket/p/heads/: LIST failed: "):
        store.sync(full=True)  # the listing is lazy: its request fails as it is read

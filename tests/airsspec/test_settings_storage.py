"""``[storage] url`` is a plain bucket and prefix, refused with one line otherwise (exit 2: the
input is wrong); a store that cannot be reached exits 1 (the machine failed, not the input)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.config import load_settings
from eventlog.errors import SettingsError
from eventlog.storage import parse_url
from tests.support.cli import run_cli

BAD_URLS = [
    "s3://bucket/../../etc",
    "s3://bucket/a/../b",
    "s3://bucket/./a",
    "s3://bucket/a//b",
    "s3://bucket//",
    "s3://bucket/a b",
    "s3://bucket/a?versionId=1",
    "s3://bucket/a#b",
    "s3://bucket/a\\b",
    "s3://b/prefix",  # no bucket name is one letter
    "s3://Bucket/prefix",
    "s3://-bucket/prefix",
    "s3://bucket..x/prefix",
    "s3://user@bucket/prefix",
    "s3://bucket:9000/prefix",
    "s3:///prefix",
    "gs://bucket/prefix",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_storage_url_that_is_not_a_plain_bucket_and_prefix_is_refused(url: str) -> None:
    with pytest.raises(SettingsError, match=r"\[storage\] url: ") as refused:
        load_settings(None, env={"AIRSSPEC_STORAGE_URL": url})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("s3://bucket", ("bucket", "")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://my-bucket.eu/team/airsspec", ("my-bucket.eu", "team/airsspec")),
        ("s3://b-0123abcd/bench/", ("b-0123abcd", "bench")),
        ("s3://bucket/a_b/c.d/(e)!*'", ("bucket", "a_b/c.d/(e)!*'")),
    ],
)
def test_a_plain_bucket_and_prefix_is_read_as_written(url: str, parsed: tuple[str, str]) -> None:
    assert parse_url(url) == parsed
    assert load_settings(None, env={"AIRSSPEC_STORAGE_URL": url}).storage.url == url


def _config(root: Path, storage: str) -> Path:
    root.mkdir()
    (root / "airsspec.toml").write_text(f"[storage]\n{storage}")
    return root


@pytest.mark.slow
def test_the_cli_refuses_a_bad_url_with_one_line_and_an_unreachable_store_exits_1(
    tmp_path: Path,
) -> None:
    bad = _config(tmp_path / "bad", 'url = "s3://bucket/../../etc"\n')
    refused = run_cli("status", cwd=bad)
    err = refused.stderr.decode()
    assert refused.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith("airsspec: error: ") and "[storage] url: " in err and "'..'" in err
    assert sorted(p.name for p in bad.iterdir()) == ["airsspec.toml"]  # nothing made
    pytest.importorskip(
        "obstore", reason="obstore is not installed (pip install 'airsspec-memory[s3]')"
    )
    down = _config(tmp_path / "down", 'url = "s3://bucket/p"\nendpoint = "http://127.0.0.1:1"\n')
    aws = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1"}
    failed = run_cli("sessions", cwd=down, env=aws)
    err = failed.stderr.decode()
    assert failed.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("airsspec: error: s3://bucket/p/") and "failed" in err
    # sealed for its owner, read from the bucket first: a listing that fails as its pages are
    # read is the same one line, not a traceback
    with (down / "airsspec.toml").open("a") as f:
        f.write('[privacy]\nencrypt = "user"\n')
    said = b'{"type": "user", "content": "x"}\n'
    failed = run_cli("append", "s1", cwd=down, env={**aws, "AIRSSPEC_USER": "ana"}, stdin=said)
    err = failed.stderr.decode()
    assert failed.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("airsspec: error: s3://bucket/p/") and "LIST failed" in err

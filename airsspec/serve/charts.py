"""Charts of the analytics page as server-rendered SVG: the geometry of horizontal bar charts
computed here, drawn by the ``chart`` macro of ``templates/charts.html`` with presentation
attributes only (no inline style, no script), so the pages keep their strict CSP."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

BAR = 22  # the height of one bar, in SVG units
LABEL = 220  # the width left for the labels
WIDTH = 760  # the whole chart's width
# Distinct colours (Okabe-Ito, readable by colour-blind readers), one per series.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000")


@dataclass
class Segment:
    """One coloured part of a bar: its x, width, colour and what it counts."""

    x: float
    width: float
    colour: str
    title: str


@dataclass
class Bar:
    """One row of a chart: its label, its y, and its segments (one per series)."""

    label: str
    y: float
    value: str
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Chart:
    """A horizontal bar chart: a title, the series' names and colours, and the bars."""

    title: str
    series: list[tuple[str, str]]
    bars: list[Bar]
    width: int = WIDTH
    label_width: int = LABEL

    @property
    def height(self) -> int:
        return BAR * len(self.bars) + 30


def bar_chart(
    title: str, rows: Iterable[tuple[str, list[float]]], series: list[str], unit: str = ""
) -> Chart:
    """A chart of ``rows`` (a label and one value per series, stacked left to right), scaled
    so that the longest bar fills the width."""
    rows = list(rows)
    longest = max((sum(values) for _, values in rows), default=0) or 1
    scale = (WIDTH - LABEL - 80) / longest
    colours = [(name, PALETTE[i % len(PALETTE)]) for i, name in enumerate(series)]
    bars = []
    for i, (label, values) in enumerate(rows):
        bar = Bar(label=label, y=i * BAR + 4, value=f"{_number(sum(values))}{unit}")
        x = float(LABEL)
        for (name, colour), value in zip(colours, values, strict=True):
            if value:
                said = f"{label}: {_number(value)}{unit} {name}"
                bar.segments.append(Segment(x, value * scale, colour, said))
                x += value * scale
        bars.append(bar)
    return Chart(title=title, series=colours, bars=bars)


def _number(value: float) -> str:
    """``value`` as a person reads it: a whole number with thousands separated, or one
    decimal."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"

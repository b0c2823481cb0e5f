# SPDX-License-Identifier: MIT
"""Line plots as inline SVG text: the curves of ``mushin-box report``.

Design note: the report must open anywhere, offline, so a plot is drawn into the page
itself. A JavaScript plotting library would have to be vendored into every report (tens
to hundreds of KB each) and run in the reader's browser; matplotlib would be a dependency
of the package (or an optional extra without which a report has no curves) and costs a
second to import. Metric curves need little: axes with round ticks, one polyline per cell,
gaps where a value is NaN, a marker per point, a tooltip naming the cell. That is drawn here
in pure Python, so every report has its curves, and each curve is a ``<path class="curve"
data-cell="...">`` a test (or a reader's tool) can find.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from mushin_box._results.htmlpage import esc

__all__ = ["PALETTE", "Line", "color", "line_plot", "nice_ticks"]

#: a colour per cell, cycled (Tableau 10: distinguishable, and safe for most colour vision)
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@attrs.frozen
class Line:
    """One curve: its label (the cell), colour, and points (NaN: no point)."""

    label: str
    color: str
    xs: Sequence[float]
    ys: Sequence[float]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (steps of 1, 2 or 5 times a power of ten).

    Examples
    --------
    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    >>> nice_ticks(3.0, 3.0)
    [2.8, 3.0, 3.2]
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi == lo:
        span = abs(lo) * 0.1 or 0.5
        lo, hi = lo - span / 2, hi + span / 2
        count = 2
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    # 0.6, not 0.6000000000000001
    ticks = [float(f"{k * step:.12g}") for k in range(first, last + 1)]
    return ticks


def _label(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:.4g}"


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if isinstance(v, int | float) and math.isfinite(v)]


def line_plot(
    lines: Sequence[Line],
    *,
    xlabel: str,
    title: str = "",
    width: int = 480,
    height: int = 300,
) -> str:
    """An SVG line plot of ``lines`` (one ``<path class="curve">`` each, NaN breaks a line).

    Examples
    --------
    >>> svg = line_plot([Line("a", "#000", [0, 1, 2], [1.0, float("nan"), 0.5])], xlabel="epoch")
    >>> svg.count('class="curve"'), 'data-cell="a"' in svg
    (1, True)
    """
    left, right, top, bottom = 64, 12, 10, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = _finite([x for line in lines for x in line.xs])
    ys = _finite([y for line in lines for y in line.ys])
    xticks = nice_ticks(min(xs, default=0.0), max(xs, default=1.0))
    yticks = nice_ticks(min(ys, default=0.0), max(ys, default=1.0))
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    if all(float(x).is_integer() for x in xs) and x1 - x0 <= 12:
        xticks = [float(x) for x in range(int(x0), int(x1) + 1)]  # epochs: whole numbers

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1.0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y0) / ((y1 - y0) or 1.0) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" '
        'stroke="#d0d7de"/>',
    ]
    for t in yticks:
        y = py(t)
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(_label(t))}</text>'
        )
    for t in xticks:
        x = px(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" '
            f'stroke="#57606a"/><text x="{x:.1f}" y="{top + plot_h + 16}" '
            f'text-anchor="middle">{esc(_label(t))}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">'
        f"{esc(xlabel)}</text>"
    )
    # a marker per point while they stay apart; a crowded plot gets lines only
    markers = len(lines) <= 20 and max((len(line.xs) for line in lines), default=0) <= 60
    for line in lines:
        parts: list[str] = []
        dots: list[str] = []
        pen_up = True
        for x, y in zip(line.xs, line.ys, strict=True):
            if not (math.isfinite(x) and math.isfinite(y)):
                pen_up = True
                continue
            parts.append(f"{'M' if pen_up else 'L'}{px(x):.1f},{py(y):.1f}")
            if markers:
                dots.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5"/>')
            pen_up = False
        label = esc(line.label)
        out.append(
            f'<g class="cell-curve" data-cell="{label}" fill="{line.color}">'
            f'<path class="curve" data-cell="{label}" d="{" ".join(parts)}" fill="none" '
            f'stroke="{line.color}" stroke-width="2" stroke-linejoin="round">'
            f"<title>{label}</title></path>{''.join(dots)}</g>"
        )
    out.append("</svg>")
    return "".join(out)

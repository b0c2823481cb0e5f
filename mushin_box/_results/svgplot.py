# SPDX-License-Identifier: MIT
"""Line plots as inline SVG text: the curves of ``mushin-box report``.

Design note: the report must open anywhere, offline, so a plot is drawn into the page
itself. A JavaScript plotting library would have to be vendored into every report (tens
to hundreds of KB each) and run in the reader's browser; matplotlib would be a dependency
of the package (or an optional extra without which a report has no curves) and costs a
second to import. Metric curves need little: axes with round ticks, one polyline per cell,
gaps where a value is NaN, a marker per point, a tooltip naming the cell and the value, a
log axis when one cell's curve would flatten the rest. That is drawn here in pure Python, so
every report has its curves, and each curve is a ``<path class="curve" data-cell="...">`` a
test (or a reader's tool) can find.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

from mushin_box._results.htmlpage import esc

__all__ = [
    "LOG_SPAN",
    "PALETTE",
    "Band",
    "Line",
    "color",
    "line_plot",
    "log_possible",
    "log_ticks",
    "nice_ticks",
    "wants_log",
]

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
    """One curve: its label (the cell), colour, and points (NaN: no point).

    ``emphasis``: ``"best"`` (drawn bold, on top), ``"faded"`` (another cell while one is
    best), or ``""``; ``sweep``: the other sweep's name for a curve of ``--against``, drawn
    dashed (``""``: the report's own sweep)."""

    label: str
    color: str
    xs: Sequence[float]
    ys: Sequence[float]
    emphasis: str = ""
    sweep: str = ""


#: a series spanning more than this factor gets a log axis by default
LOG_SPAN = 100.0


def log_possible(lines: Sequence[Line]) -> bool:
    """Can these curves be drawn on a log axis (every finite value positive, some)?"""
    ys = _finite([y for line in lines for y in line.ys])
    return bool(ys) and min(ys) > 0


def wants_log(lines: Sequence[Line]) -> bool:
    """Should these curves start on a log axis: positive, and spanning more than
    :data:`LOG_SPAN` (one diverging cell would flatten the rest on a linear one)?

    Examples
    --------
    >>> def one(*ys):
    ...     return [Line("a", "#000", list(range(len(ys))), list(ys))]
    >>> wants_log(one(0.5, 80.0)), wants_log(one(0.5, 40.0)), wants_log(one(0.0, 80.0))
    (True, False, False)
    """
    ys = _finite([y for line in lines for y in line.ys])
    return log_possible(lines) and max(ys) / min(ys) > LOG_SPAN


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


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis covering ``[lo, hi]`` (both > 0): the powers of ten, and 2 and 5
    times them while the range spans two decades or less.

    Examples
    --------
    >>> log_ticks(0.3, 2000.0)
    [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]
    >>> log_ticks(0.3, 4.0)
    [0.2, 0.5, 1.0, 2.0, 5.0]
    """
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last == first:
        last += 1
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = [float(f"{m * 10.0**k:.12g}") for k in range(first, last + 1) for m in steps]
    # the decade just below lo and the tick just above hi bound the axis
    below = [t for t in ticks if t <= lo]
    above = [t for t in ticks if t >= hi]
    return [t for t in ticks if below[-1] <= t <= above[0]]


def _label(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:.6g}"  # 10000, not 1e+04, on a log axis


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if isinstance(v, int | float) and math.isfinite(v)]


def _axes(lines: Sequence[Line], log: bool) -> tuple[list[float], list[float]]:
    xs = _finite([x for line in lines for x in line.xs])
    ys = _finite([y for line in lines for y in line.ys if not log or y > 0])
    xticks = nice_ticks(min(xs, default=0.0), max(xs, default=1.0))
    if log and ys:
        yticks = log_ticks(min(ys), max(ys))
    else:
        yticks = nice_ticks(min(ys, default=0.0), max(ys, default=1.0))
    x0, x1 = xticks[0], xticks[-1]
    if all(float(x).is_integer() for x in xs) and x1 - x0 <= 12:
        xticks = [float(x) for x in range(int(x0), int(x1) + 1)]  # epochs: whole numbers
    return xticks, yticks


def line_plot(
    lines: Sequence[Line],
    *,
    xlabel: str,
    title: str = "",
    width: int = 480,
    height: int = 300,
    log: bool = False,
    band: Band | None = None,
) -> str:
    """An SVG line plot of ``lines`` (one ``<path class="curve">`` each, NaN breaks a line;
    ``log``: a log y axis, where a value <= 0 breaks it too). Each point's marker holds
    its value as a tooltip (``<title>``), and each curve its cell and last value. ``band``:
    (x, lowest, highest, label) of the cells not drawn as lines, one grey
    ``<path class="band">`` under them.

    Examples
    --------
    >>> svg = line_plot([Line("a", "#000", [0, 1, 2], [1.0, float("nan"), 0.5])], xlabel="epoch")
    >>> svg.count('class="curve"'), 'data-cell="a"' in svg, "<title>a · epoch 2: 0.5</title>" in svg
    (1, True, True)
    """
    left, right, top, bottom = 64, 12, 10, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    edges = [Line("", "", band[0], ys) for ys in band[1:3]] if band else []
    xticks, yticks = _axes([*lines, *edges], log)
    x0, x1 = xticks[0], xticks[-1]
    scale = math.log10 if log else float
    y0, y1 = scale(yticks[0]), scale(yticks[-1])

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1.0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (scale(y) - y0) / ((y1 - y0) or 1.0) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" '
        f'data-scale="{"log" if log else "linear"}" font-family="sans-serif" font-size="11">',
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
        f"{esc(xlabel)}{' (log y)' if log else ''}</text>"
    )
    if band:
        out.append(_band(band, px, py, log=log))
    # a marker per point while they stay apart; a crowded plot gets lines only
    markers = len(lines) <= 20 and max((len(line.xs) for line in lines), default=0) <= 60
    # the best cell last, so that it is drawn over the others
    ordered = sorted(lines, key=lambda line: line.emphasis == "best")
    for line in ordered:
        out.append(_curve(line, px, py, markers=markers, log=log, xlabel=xlabel))
    out.append("</svg>")
    return "".join(out)


#: the cells drawn as a band: x, lowest y, highest y, and what the band is (its tooltip)
Band = tuple[Sequence[float], Sequence[float], Sequence[float], str]


def _band(band: Band, px: Any, py: Any, *, log: bool) -> str:
    xs, lows, highs, label = band
    points = [(x, lo, hi) for x, lo, hi in zip(xs, lows, highs, strict=True) if lo > 0 or not log]
    if not points:
        return ""
    top = [f"{px(x):.1f},{py(hi):.1f}" for x, _, hi in points]
    bottom = [f"{px(x):.1f},{py(lo):.1f}" for x, lo, _ in reversed(points)]
    return (
        f'<path class="band" d="M{" L".join(top + bottom)} Z" fill="#8c959f" '
        f'fill-opacity="0.3" stroke="#8c959f" stroke-width="0.5"><title>{esc(label)}</title>'
        "</path>"
    )


#: stroke per emphasis: width, opacity
_STROKE = {"best": ("3.5", "1"), "faded": ("1.5", "0.3"), "": ("2", "1")}


def _curve(line: Line, px: Any, py: Any, *, markers: bool, log: bool, xlabel: str) -> str:
    parts: list[str] = []
    dots: list[str] = []
    pen_up = True
    name = f"{line.label} ({line.sweep})" if line.sweep else line.label
    last = None
    for x, y in zip(line.xs, line.ys, strict=True):
        if not (math.isfinite(x) and math.isfinite(y)) or (log and y <= 0):
            pen_up = True
            continue
        parts.append(f"{'M' if pen_up else 'L'}{px(x):.1f},{py(y):.1f}")
        tip = f"{name} · {xlabel} {_label(x)}: {y:.6g}"
        if markers:
            dots.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5"><title>{esc(tip)}</title>'
                "</circle>"
            )
        pen_up, last = False, tip
    label = esc(line.label)
    width, opacity = _STROKE.get(line.emphasis, _STROKE[""])
    dash = ' stroke-dasharray="6 4"' if line.sweep else ""
    cls = "curve against" if line.sweep else "curve"
    sweep = f' data-sweep="{esc(line.sweep)}"' if line.sweep else ""
    emphasis = f' data-emphasis="{line.emphasis}"' if line.emphasis else ""
    return (
        f'<g class="cell-curve" data-cell="{label}"{sweep} fill="{line.color}" '
        f'fill-opacity="{opacity}">'
        f'<path class="{cls}" data-cell="{label}" d="{" ".join(parts)}"{sweep}{emphasis} '
        f'fill="none" stroke="{line.color}" stroke-width="{width}" '
        f'stroke-opacity="{opacity}"{dash} stroke-linejoin="round">'
        f"<title>{esc(last or name)}</title></path>{''.join(dots)}</g>"
    )

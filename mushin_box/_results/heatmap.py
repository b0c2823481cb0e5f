# SPDX-License-Identifier: MIT
"""A metric over a two-parameter grid as an inline SVG heatmap (``mushin-box report``).

A 3 × 3 grid of ``hidden`` × ``lr`` reads at a glance as a coloured grid: one row per value
of the first parameter, one column per value of the second, each square coloured by the
metric on one scale (a log scale when the values span more than 100×, as the curves' axis)
and its value printed in it, the best cell outlined. Squares without a
value (a failed cell) are grey and say ``-``. Drawn in pure Python, like
:mod:`mushin_box._results.svgplot`.

Examples
--------
>>> svg = heatmap_svg(["16", "32"], ["0.1", "1.0"], {("16", "0.1"): 0.5, ("32", "1.0"): 2.0},
...                   ylabel="hidden", xlabel="lr", metric="val_loss", best=("16", "0.1"))
>>> svg.count('class="heat"'), 'data-best="1"' in svg, ">-</text>" in svg
(4, True, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import attrs

from mushin_box._results.htmlpage import esc
from mushin_box._results.svgplot import LOG_SPAN

__all__ = ["colour_of", "heatmap_svg"]

#: a perceptually even scale, dark (low) to bright (high): viridis at five stops
_STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
_MISSING = "#d0d7de"


def colour_of(t: float) -> tuple[str, str]:
    """The fill for ``t`` in [0, 1] on the scale, and a text colour readable on it.

    Examples
    --------
    >>> colour_of(0.0), colour_of(1.0)
    (('#440154', '#fff'), ('#fde725', '#000'))
    """
    t = min(max(t, 0.0), 1.0) * (len(_STOPS) - 1)
    i = min(int(t), len(_STOPS) - 2)
    a, b = _STOPS[i], _STOPS[i + 1]
    rgb = [round(x + (y - x) * (t - i)) for x, y in zip(a, b, strict=True)]
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "#" + "".join(f"{c:02x}" for c in rgb), "#000" if luminance > 140 else "#fff"


def heatmap_svg(
    rows: Sequence[str],
    columns: Sequence[str],
    values: Mapping[tuple[str, str], float],
    *,
    ylabel: str,
    xlabel: str,
    metric: str,
    best: tuple[str, str] | None = None,
) -> str:
    """An SVG heatmap: ``values[(row, column)]`` on one colour scale (lowest darkest)."""
    finite = [v for v in values.values() if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    # one diverged cell would paint every other square the same: a log scale, as the curves
    log = bool(finite) and lo > 0 and hi / lo > LOG_SPAN
    scale = _Scale(lo, hi, log)
    # a large grid (100 x 100) gets small squares without their value written in: the
    # page stays a few hundred KB, and the value is still each square's tooltip
    compact = len(rows) * len(columns) > _COMPACT
    cell_w, cell_h = (14, 14) if compact else (84, 36)
    step = math.ceil(7 * max((len(c) for c in columns), default=1) / cell_w) if compact else 1
    left = 16 + 7 * max((len(r) for r in rows), default=1)
    top = 34
    width = left + cell_w * len(columns) + 12
    height = top + cell_h * len(rows) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(metric)}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left + cell_w * len(columns) / 2:.0f}" y="12" text-anchor="middle" '
        f'font-weight="600">{esc(xlabel)}</text>',
        f'<text x="4" y="{top - 8}" font-weight="600">{esc(ylabel)}</text>',
    ]
    for j, column in enumerate(columns):
        if j % step:
            continue  # labels that would overlap: every step-th
        x = left + j * cell_w + cell_w / 2
        out.append(f'<text x="{x:.0f}" y="{top - 6}" text-anchor="middle">{esc(column)}</text>')
    for i, row in enumerate(rows):
        y = top + i * cell_h
        out.append(
            f'<text x="{left - 6}" y="{y + cell_h / 2 + 4:.0f}" text-anchor="end">{esc(row)}</text>'
        )
        for j, column in enumerate(columns):
            value = values.get((row, column), math.nan)
            tip = f"{ylabel}={row} {xlabel}={column}: {metric} = "
            box = (left + j * cell_w, y, cell_w, cell_h)
            square = _square(row, column, value, scale, best == (row, column), tip, box)
            out.append(_unlabelled(square) if compact else square)
    low, high = colour_of(0.0)[0], colour_of(1.0)[0]
    out.append(
        f'<text x="{left}" y="{height - 10}">{esc(metric)}: '
        f'<tspan fill="{low}">■</tspan> {esc(f"{lo:.4g}")} … '
        f'<tspan fill="{high}">■</tspan> {esc(f"{hi:.4g}")}{" (log scale)" if log else ""}'
        "</text></svg>"
    )
    return "".join(out)


#: more squares than this are drawn small, their values in their tooltips only
_COMPACT = 400


def _unlabelled(square: str) -> str:
    """A square without the value written on it (``<text>``), and thinner lines."""
    rect = square[: square.index("<text ")]
    return rect.replace(' stroke-width="3"', ' stroke-width="2"') + "</g>"


@attrs.frozen
class _Scale:
    lo: float
    hi: float
    log: bool

    def at(self, value: float) -> float:
        """Where ``value`` sits on the scale, 0 to 1."""
        f = math.log10 if self.log else float
        lo, hi = f(self.lo), f(self.hi)
        return (f(value) - lo) / (hi - lo) if hi > lo else 0.5


def _square(
    row: str,
    column: str,
    value: float,
    scale: _Scale,
    is_best: bool,
    tip: str,
    box: tuple[float, float, int, int],
) -> str:
    x, y, w, h = box
    if math.isfinite(value):
        fill, ink = colour_of(scale.at(value))
        text = f"{value:.4g}"
    else:
        fill, ink, text = _MISSING, "#57606a", "-"
    outline = ' stroke="#cf222e" stroke-width="3"' if is_best else ' stroke="#fff"'
    mark = ' data-best="1"' if is_best else ""
    bold = ' font-weight="700"' if is_best else ""
    return (
        f'<g><rect class="heat" x="{x + 1}" y="{y + 1}" width="{w - 2}" height="{h - 2}" '
        f'fill="{fill}"{outline} data-row="{esc(row)}" data-column="{esc(column)}" '
        f'data-value="{esc(text)}"{mark}><title>{esc(tip + text)}</title></rect>'
        f'<text x="{x + w / 2:.0f}" y="{y + h / 2 + 4:.0f}" text-anchor="middle" '
        f'fill="{ink}"{bold}>{esc(text)}</text></g>'
    )

# SPDX-License-Identifier: MIT
"""The markup of ``report`` and ``diff --html`` (HTML, inline SVG plots and heatmaps), and
the Markdown tables of ``show --md`` and ``diff --md``.

A page is one self-contained file, often read offline: nothing fetched, no JavaScript (a
log-axis toggle is a checkbox and CSS, a point's value an SVG ``<title>``), every text from
a file through :func:`esc`; plots in pure Python (matplotlib is slow to import), each curve
a ``<path class="curve" data-cell="...">`` a test can find.

Examples
--------
>>> svg = heatmap_svg(["16", "32"], ["0.1", "1.0"], {("16", "0.1"): 0.5, ("32", "1.0"): 2.0},
...                   ylabel="hidden", xlabel="lr", metric="val_loss", best=("16", "0.1"))
>>> svg.count('class="heat"'), 'data-best="1"' in svg, ">-</text>" in svg
(4, True, True)
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

#: every page's mark, so that ``report -o FILE`` knows an earlier page (which it may
#: replace) from a file it must not write over
GENERATOR = '<meta name="generator" content="mushin-box">'

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #1f2328; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.2em; margin: 1.6em 0 .5em;
  border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
h3 { font-size: 1em; margin: .8em 0 .3em; }
.meta { color: #57606a; margin: 0 0 1em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; }
tr.best td { background: #dafbe1; font-weight: 600; }
.state-completed { color: #1a7f37; } .state-failed, .state-timeout { color: #cf222e; }
.state-cancelled, .state-skipped { color: #9a6700; } .state-running { color: #0969da; }
.state-pending { color: #6e7781; }
.breaks th { background: #ffebe9; } .expected th { background: #fff8c5; }
.extended th { background: #ddf4ff; }
.verdict-ok { color: #1a7f37; font-weight: 600; }
.verdict-bad { color: #cf222e; font-weight: 600; }
.plots { display: flex; flex-wrap: wrap; gap: 1.2em; }
figure.plot { margin: 0; width: 100%; } figure.plot svg { width: 100%; height: auto; }
figure.plot figcaption { font-weight: 600; margin-bottom: .2em; }
.legend { display: flex; flex-wrap: wrap; gap: .2em 1em; max-width: none; font-size: 12px; }
.swatch { display: inline-block; width: 14px; height: 3px; vertical-align: middle;
          margin-right: 4px; background: var(--c, #57606a); }
.swatch.dashed { background: repeating-linear-gradient(90deg, var(--c, #57606a) 0 5px,
                 transparent 5px 8px); }
.swatch.band { background: #8c959f; opacity: 0.5; height: 9px; }
.more { color: #57606a; }
.legend .best { font-weight: 700; }
.logy, .logy-label { float: right; font-size: 12px; margin: 0 0 0 .3em; }
.logy:checked ~ .scale.lin, .logy:not(:checked) ~ .scale.log { display: none; }
figure.heatmap { margin: 0; }
pre.error { white-space: pre-wrap; background: #f6f8fa; padding: .5em; margin: .2em 0;
            max-height: 12em; overflow: auto; }
.note { background: #f6f8fa; border-left: 4px solid #d0d7de; padding: .4em .8em; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
"""


def esc(text: object) -> str:
    """Text (any value, as ``str``) safe inside an element or a quoted attribute."""
    return html.escape(str(text), quote=True)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    row_classes: Iterable[str] | None = None,
    numeric: Sequence[bool] | None = None,
    cls: str = "",
) -> str:
    """A table; headers are escaped here, cells must already be HTML (``esc`` them)."""
    out = [f'<table class="{esc(cls)}">' if cls else "<table>", "<thead><tr>"]
    out += [f"<th>{esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    classes = iter(row_classes or ())
    for row in rows:
        row_cls = next(classes, "")
        out.append(f'<tr class="{esc(row_cls)}">' if row_cls else "<tr>")
        for i, cell in enumerate(row):
            num = numeric is not None and i < len(numeric) and numeric[i]
            out.append(f'<td class="num">{cell}</td>' if num else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def page(title: str, body: str) -> str:
    """A whole HTML document: ``body`` (HTML) under a title, with the inline CSS."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"{GENERATOR}\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # nothing may be fetched: the page works offline, and says so to the browser
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def is_page(head: bytes) -> bool:
    """Do these first bytes of a file start a page mushin-box wrote (the mark, or an older
    page's title)?

    >>> is_page(page("mushin-box report: lr", "").encode()), is_page(b'{"loss": 0.5}')
    (True, False)
    """
    if not head.startswith(b"<!DOCTYPE html>"):
        return False
    return GENERATOR.encode() in head or b"<title>mushin-box " in head


_MD_SPECIAL = str.maketrans({c: f"\\{c}" for c in "\\|*_`<>[]"})


def _md_cell(text: str) -> str:
    # Markdown would read `_target_` as emphasis and `|` as a column break
    return " ".join(str(text).split()).translate(_MD_SPECIAL) or " "


def md_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table, its cells literal text.

    >>> print(md_table(["a", "b"], [["1", "x|_y_"]]))
    | a | b |
    |---|---|
    | 1 | x\\|\\_y\\_ |
    """
    lines = [
        "| " + " | ".join(map(_md_cell, headers)) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
    return "\n".join(lines)


#: a colour per cell, cycled (Tableau 10: distinguishable, and safe for most colour vision)
PALETTE = tuple(
    "#4e79a7 #f28e2b #e15759 #76b7b2 #59a14f #edc948 #b07aa1 #ff9da7 #9c755f #bab0ac".split()
)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@attrs.frozen
class Line:
    """One curve (NaN: no point). ``emphasis``: ``"best"`` (bold, on top), ``"faded"``
    (another cell while one is best) or ``""``; ``sweep``: the ``--against`` sweep's name
    (drawn dashed), ``""`` for the report's own."""

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
    :data:`LOG_SPAN` (one diverging cell would flatten the rest)?

    >>> def one(*ys):
    ...     return [Line("a", "#000", list(range(len(ys))), list(ys))]
    >>> wants_log(one(0.5, 80.0)), wants_log(one(0.5, 40.0)), wants_log(one(0.0, 80.0))
    (True, False, False)
    """
    ys = _finite([y for line in lines for y in line.ys])
    return log_possible(lines) and max(ys) / min(ys) > LOG_SPAN


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round ticks covering ``[lo, hi]`` (steps of 1, 2 or 5 times a power of ten).

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
    return [float(f"{k * step:.12g}") for k in range(first, last + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis covering ``[lo, hi]`` (both > 0): the powers of ten, and 2 and 5
    times them while the range spans two decades or less.

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
    log: bool = False,
    band: Band | None = None,
) -> str:
    """An SVG line plot: NaN (and on a ``log`` axis a value <= 0) breaks a line; each
    point's marker and each curve hold a tooltip; ``band``: the cells not drawn as lines,
    one grey ``<path class="band">`` under them.

    >>> svg = line_plot([Line("a", "#000", [0, 1, 2], [1.0, float("nan"), 0.5])], xlabel="epoch")
    >>> svg.count('class="curve"'), 'data-cell="a"' in svg, "<title>a · epoch 2: 0.5</title>" in svg
    (1, True, True)
    """
    width, height, left, right, top, bottom = 1160, 380, 64, 12, 10, 40
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
        # the page's width (CSS keeps the aspect): the viewBox is the page's at 1:1
        f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" '
        f'data-scale="{"log" if log else "linear"}" font-family="sans-serif" font-size="12">',
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
    for line in sorted(lines, key=lambda line: line.emphasis == "best"):
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


#: a perceptually even scale, dark (low) to bright (high): viridis at five stops
_STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
_MISSING = "#d0d7de"


def colour_of(t: float) -> tuple[str, str]:
    """The fill for ``t`` in [0, 1] on the scale, and a text colour readable on it.

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
    """An SVG heatmap: ``values[(row, column)]`` coloured by rank (lowest darkest); a grid
    of more than :data:`_COMPACT` squares is drawn small, its values in tooltips only (a
    100 x 100 grid's page stays a few hundred KB)."""
    finite = sorted({v for v in values.values() if math.isfinite(v)})
    lo, hi = (finite[0], finite[-1]) if finite else (0.0, 1.0)
    # by rank, not value: values spanning orders of magnitude (or one diverged cell) would
    # paint all but one square the same on a linear scale, and a log one needs v > 0
    ranks = {v: k / (len(finite) - 1) if len(finite) > 1 else 0.5 for k, v in enumerate(finite)}

    compact = len(rows) * len(columns) > _COMPACT
    cell_w, cell_h = (14, 14) if compact else (84, 36)
    step = math.ceil(7 * max((len(c) for c in columns), default=1) / cell_w) if compact else 1
    # the row parameter's name ends before the first column's header starts
    overhang = max(0.0, 3.5 * len(columns[0] if columns else "") - cell_w / 2)
    left = max(16 + 7 * max((len(r) for r in rows), default=1), 14 + 8 * len(ylabel) + overhang)
    top = 34
    width = left + cell_w * len(columns) + 12
    height = top + cell_h * len(rows) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(metric)}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left + cell_w * len(columns) / 2:.0f}" y="12" text-anchor="middle" '
        f'font-weight="600">{esc(xlabel)}</text>',
        f'<text class="ylabel" x="{left - 6 - overhang:.0f}" y="{top - 6}" text-anchor="end" '
        f'font-weight="600">{esc(ylabel)}</text>',
    ]
    for j, column in enumerate(columns):
        if j % step:
            continue  # labels that would overlap: every step-th
        x = left + j * cell_w + cell_w / 2
        out.append(
            f'<text class="colhead" x="{x:.0f}" y="{top - 6}" text-anchor="middle">'
            f"{esc(column)}</text>"
        )
    for i, row in enumerate(rows):
        y = top + i * cell_h
        out.append(
            f'<text x="{left - 6}" y="{y + cell_h / 2 + 4:.0f}" text-anchor="end">{esc(row)}</text>'
        )
        for j, column in enumerate(columns):
            value = values.get((row, column), math.nan)
            x = left + j * cell_w
            if math.isfinite(value):
                fill, ink = colour_of(ranks[value])
                text = f"{value:.4g}"
            else:
                fill, ink, text = _MISSING, "#57606a", "-"
            is_best = best == (row, column)
            width = 2 if compact else 3
            outline = f' stroke="#cf222e" stroke-width="{width}"' if is_best else ' stroke="#fff"'
            bold, mark = (' font-weight="700"', ' data-best="1"') if is_best else ("", "")
            label = (
                ""
                if compact
                else f'<text x="{x + cell_w / 2:.0f}" y="{y + cell_h / 2 + 4:.0f}" '
                f'text-anchor="middle" fill="{ink}"{bold}>{esc(text)}</text>'
            )
            tip = f"{ylabel}={row} {xlabel}={column}: {metric} = {text}"
            out.append(
                f'<g><rect class="heat" x="{x + 1}" y="{y + 1}" width="{cell_w - 2}" '
                f'height="{cell_h - 2}" fill="{fill}"{outline} data-row="{esc(row)}" '
                f'data-column="{esc(column)}" data-value="{esc(text)}"{mark}>'
                f"<title>{esc(tip)}</title></rect>{label}</g>"
            )
    low, high = colour_of(0.0)[0], colour_of(1.0)[0]
    out.append(
        f'<text x="{left}" y="{height - 10}">{esc(metric)}: '
        f'<tspan fill="{low}">■</tspan> {esc(f"{lo:.4g}")} … '
        f'<tspan fill="{high}">■</tspan> {esc(f"{hi:.4g}")} (colour by rank)</text></svg>'
    )
    return "".join(out)


#: more squares than this are drawn small, their values in their tooltips only
_COMPACT = 400

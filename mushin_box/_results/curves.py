# SPDX-License-Identifier: MIT
"""The report's pictures: every ``MetricsCallback`` series as curves, and the 2-parameter
heatmap.

- One plot per series, one line per cell, a cell keeping its colour in every plot and
  named by the parameters that vary (``hidden=32 lr=0.1``, not the directory).
- With ``--best``, the best cell is drawn bold and on top, the others faded.
- A plot whose values span more than 100× starts on a log axis (one diverging cell would
  flatten the others); each plot with positive values has a ``log y`` toggle. The toggle is
  a checkbox and two inline SVGs, one shown by CSS: no script, so the page's
  Content-Security-Policy stays ``default-src 'none'``.
- With ``--against OTHER``, the other sweep's curves are drawn dashed on the same plots, in
  the colour of the cell with the same swept values.
- A sweep over two parameters gets a heatmap of one metric (``--best``'s, else the first
  scalar metric that varies, else the last epoch of the first series).

Series are read by :func:`~mushin_box._results.stagefile.stage_series` as plain lists (the
JSON twins: no numpy, xarray or torch; torch only for a job written before the twins).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._results.heatmap import heatmap_svg
from mushin_box._results.htmlpage import esc
from mushin_box._results.manycells import CURVES, band, top_cells
from mushin_box._results.stagefile import PlainSeries, stage_series
from mushin_box._results.svgplot import Band, Line, color, line_plot, log_possible, wants_log
from mushin_box._results.table import ResultsTable, cell_label, cell_text, format_param
from mushin_box._sweepdir.board import CellView, SweepView

__all__ = ["Curves", "curves_section", "heatmap_section", "read_curves", "short_labels"]

#: per cell: series name -> (index dimension, index, values)
Curves = list[dict[str, PlainSeries]]


def short_labels(cells: Sequence[CellView]) -> list[str]:
    """Each cell's name in a legend: only the swept values that differ between the cells.

    Examples
    --------
    >>> from mushin_box._sweepdir.board import CellView
    >>> cells = [CellView(dir=None, combo={"hidden": h, "lr": 0.1, "wd": w}, state="completed",
    ...          recorded_state="completed") for h, w in ((16, 0.0), (32, 0.1))]
    >>> short_labels(cells)
    ['hidden=16 wd=0.0', 'hidden=32 wd=0.1']
    """
    keys = list(dict.fromkeys(k for c in cells for k in c.combo))
    varying = [k for k in keys if len({cell_text(c.combo.get(k)) for c in cells}) > 1]
    if not varying:
        return [cell_label(c) for c in cells]
    return [
        " ".join(f"{k}={format_param(c.combo[k])}" for k in varying if k in c.combo) for c in cells
    ]


def read_curves(root: Path, cells: Sequence[CellView]) -> Curves:
    """Each cell's scalar series (a logged vector has no curve)."""
    base = os.fspath(root)  # os.path, not pathlib: 10,000 cells
    return [stage_series(os.path.join(base, cell.dir)) if cell.dir else {} for cell in cells]


def _key(combo: Mapping[str, Any]) -> str:
    return json.dumps(combo, sort_keys=True, default=str)


#: per plot: the x and y lists of the cells drawn as a band, not as lines
_Rest = dict[str, tuple[list[list[float]], list[list[float]]]]


def _lines(
    results: ResultsTable,
    curves: Curves,
    other: tuple[str, SweepView, Curves] | None,
    drawn: set[int] | None = None,
) -> tuple[dict[str, list[Line]], dict[str, str], _Rest]:
    """The lines of each plot, their x labels, and (``drawn``: the ids of the cells drawn
    as lines, None: all) the other cells' series, for the band."""
    plots: dict[str, list[Line]] = {}
    xlabels: dict[str, str] = {}
    rest: _Rest = {}
    labels = short_labels(results.cells)
    colours = {}
    for i, (cell, label, found) in enumerate(zip(results.cells, labels, curves, strict=True)):
        if other is not None:  # a cell keeps its colour in every plot, --against's too
            colours[_key(cell.combo)] = color(i)
        emphasis = ("best" if results.is_best(cell) else "faded") if results.best else ""
        for name, (dim, index, values) in found.items():
            xlabels[name] = dim.replace("_", " ")
            if drawn is not None and id(cell) not in drawn:
                xs, ys = rest.setdefault(name, ([], []))
                xs.append(index)
                ys.append(values)
                continue
            line = Line(label, color(i), index, values, emphasis)
            plots.setdefault(name, []).append(line)
    if other is not None:
        name_of, sweep, found_other = other
        other_labels = short_labels(sweep.cells)
        extra = len(results.cells)
        for cell, label, found in zip(sweep.cells, other_labels, found_other, strict=True):
            colour = colours.get(_key(cell.combo))
            if colour is None:
                colour, extra = color(extra), extra + 1
            for name, (dim, index, values) in found.items():
                xlabels.setdefault(name, dim.replace("_", " "))
                line = Line(label, colour, index, values, "faded" if results.best else "", name_of)
                plots.setdefault(name, []).append(line)
    return plots, xlabels, rest


def _figure(
    number: int, name: str, lines: list[Line], xlabel: str, legend: str, band: Band | None
) -> str:
    scaled = [*lines, *([Line("", "", band[0], ys) for ys in band[1:3]] if band else [])]
    log = wants_log(scaled)
    default = line_plot(lines, xlabel=xlabel, title=name, log=log, band=band)
    if not log_possible(scaled):  # a value <= 0: no log axis to offer
        variants = f'<div class="scale">{default}</div>'
        toggle = ""
    else:
        alternative = line_plot(lines, xlabel=xlabel, title=name, log=not log, band=band)
        linear, logarithmic = (alternative, default) if log else (default, alternative)
        ident = f"logy-{number}"
        toggle = (
            f'<input type="checkbox" class="logy" id="{ident}"{" checked" if log else ""}>'
            f'<label class="logy-label" for="{ident}">log y</label>'
        )
        variants = (
            f'<div class="scale lin">{linear}</div><div class="scale log">{logarithmic}</div>'
        )
    scale = "log" if log else "linear"
    return (
        f'<figure class="plot" data-metric="{esc(name)}" data-scale="{scale}">{toggle}'
        f"<figcaption>{esc(name)}</figcaption>{variants}{legend}</figure>"
    )


def _legend(lines: Sequence[Line], band: Band | None = None) -> str:
    spans = []
    if band is not None:
        spans.append(f'<span class="band"><span class="swatch band"></span>{esc(band[3])}</span>')
    dashed = sorted({line.sweep for line in lines if line.sweep})
    for line in lines:
        if line.sweep:
            continue
        cls = ' class="best"' if line.emphasis == "best" else ""
        spans.append(
            f'<span{cls}><span class="swatch" style="background:{line.color}"></span>'
            f"{esc(line.label)}</span>"
        )
    for name in dashed:
        spans.append(
            f'<span><span class="swatch dashed"></span>{esc(name)} (--against): dashed, '
            "coloured as the cell with the same values</span>"
        )
    return f'<div class="legend">{"".join(spans)}</div>'


def curves_section(
    results: ResultsTable,
    curves: Curves,
    other: tuple[str, SweepView, Curves] | None = None,
    *,
    most: int = CURVES,
) -> str:
    """The plots (HTML), or a note saying how to record series when no cell has one.
    Past ``most`` cells with series, the ``most`` best are lines and the rest one band
    (:mod:`~mushin_box._results.manycells`)."""
    drawn = None
    with_series = [c for c, found in zip(results.cells, curves, strict=True) if found]
    if len(with_series) > most:
        top = top_cells(with_series, most, results.best_metric, results.best_max)
        drawn = {id(c) for c in top}
    plots, xlabels, rest = _lines(results, curves, other, drawn)
    bands = {name: _band(rest[name]) for name in rest}
    if not plots and not bands:
        return (
            '<p class="note">No curves: no cell holds a MetricsCallback series '
            "(<code>fit_metrics.json</code>). Add <code>mushin_box.MetricsCallback</code> to "
            "the trainer's callbacks to record one per epoch.</p>"
        )
    keys = sorted({*plots, *bands}, key=lambda n: (not n.startswith("fit."), n))
    figures = [
        _figure(
            i,
            name,
            plots.get(name, []),
            xlabels[name],
            _legend(plots.get(name, []), bands.get(name)),
            bands.get(name),
        )
        for i, name in enumerate(keys)
    ]
    return f'<div class="plots">{"".join(figures)}</div>'


def _band(rest: tuple[list[list[float]], list[list[float]]]) -> Band:
    xs, lows, highs = band(*rest)
    count = len(rest[0])
    return xs, lows, highs, f"the other {count} cells: lowest to highest"


# ---------------------------------------------------------------------------- heatmap


def _grid_values(cells: Sequence[CellView], param: str) -> list[str]:
    values = list(dict.fromkeys(format_param(c.combo[param]) for c in cells if param in c.combo))
    try:
        return sorted(values, key=float)
    except ValueError:
        return values  # not numbers: grid order


def _heat_metric(results: ResultsTable, curves: Curves) -> tuple[str, list[float]] | None:
    """The metric the heatmap shows, and its value per cell (NaN: none)."""
    names = [results.best_metric] if results.best_metric else []
    for name in [*names, *results.metrics]:
        values = [c.metrics.get(name, math.nan) for c in results.cells]
        if len({v for v in values if math.isfinite(v)}) > 1 or name in names:
            return name, values
    series = sorted({n for found in curves for n in found}, key=lambda n: (n[:4] != "fit.", n))
    if not series:
        return None
    name = series[0]
    values = []
    for found in curves:
        ys = [y for y in found[name][2] if math.isfinite(y)] if name in found else []
        values.append(ys[-1] if ys else math.nan)
    return f"{name}@last", values


def heatmap_section(results: ResultsTable, curves: Curves) -> str:
    """A heatmap when the cells vary over exactly two parameters, else ``""``."""
    varying = [
        p for p in results.params if len({cell_text(c.combo.get(p)) for c in results.cells}) > 1
    ]
    picked = _heat_metric(results, curves) if len(varying) == 2 else None
    if picked is None:
        return ""
    metric, values = picked
    ylabel, xlabel = varying
    grid: dict[tuple[str, str], float] = {}
    best = None
    for cell, value in zip(results.cells, values, strict=True):
        if ylabel in cell.combo and xlabel in cell.combo:
            at = (format_param(cell.combo[ylabel]), format_param(cell.combo[xlabel]))
            grid[at] = value
            if results.is_best(cell):
                best = at
    svg = heatmap_svg(
        _grid_values(results.cells, ylabel),
        _grid_values(results.cells, xlabel),
        grid,
        ylabel=ylabel,
        xlabel=xlabel,
        metric=metric,
        best=best,
    )
    return f'<figure class="heatmap" data-metric="{esc(metric)}">{svg}</figure>'

# SPDX-License-Identifier: MIT
"""``mushin-box report``: a sweep as one self-contained HTML page (no torch, nothing
fetched): its table, a 2-parameter grid's heatmap, every series as curves, failed cells'
errors, the provenance summary, and the diff ``--against`` another run or sweep.

A cell is one colour in every plot, named by the parameters that vary; ``--best``'s is bold
and on top. ``--against``'s curves are dashed, paired with the cell of the same swept
values; ``--where`` filters both sweeps and the diff. Past ``rows`` cells the table shows
the best (all in a CSV ``data:`` link); past ``curves``, the rest are one grey band.

Examples
--------
>>> from mushin_box._sweepdir.board import CellView
>>> cells = [CellView(dir=f"x={i}", combo={"x": i}, state="completed",
...          recorded_state="completed", metrics={"loss": 5.0 - i}) for i in range(5)]
>>> [c.dir for c in top_cells(cells, 2, "loss", False)]
['x=4', 'x=3']
>>> band([[0.0, 1.0], [0.0, 1.0]], [[3.0, 2.0], [1.0, float("nan")]])
([0.0, 1.0], [1.0, 2.0], [3.0, 2.0])
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import ERROR_FILE, ERROR_TAIL_BYTES, PROVENANCE_FILE
from mushin_box._core.redact import redact
from mushin_box._core.sidecars import read_json, warn_sidecar
from mushin_box._core.version import __version__
from mushin_box._provenance.full import split_provenance
from mushin_box._results.diff import diff_html_section, diff_provenance, short
from mushin_box._results.markup import (
    Band,
    Line,
    color,
    esc,
    heatmap_svg,
    line_plot,
    log_possible,
    page,
    table,
    wants_log,
)
from mushin_box._results.series import PlainSeries, reduce_series, stage_series
from mushin_box._results.table import (
    ResultsError,
    ResultsTable,
    cell_label,
    cell_text,
    changed_keys,
    format_param,
    read_results,
    results_table,
    sweep_config,
    table_records,
)
from mushin_box._sweepdir.board import CellView, SweepView
from mushin_box._sweepdir.logs import tail_lines
from mushin_box._sweepdir.manifest import combo_id, is_sweep_dir

_ERROR_LINES = 40  # last lines of a cell's error file shown
#: the most table rows a report shows (the CSV link holds them all)
ROWS = 500
#: the most cells drawn as lines per plot (the others: a band)
CURVES = 20


#: the parts of a provenance record its summary reads (the rest differs per cell)
_SUMMARY_PARTS = {
    "reproducibility": ("image", "code", "package_set", "seed", "seed_base"),
    "run": ("topology", "experiment", "time"),
}
#: the most cells named in a row of the provenance table (the rest are counted)
_NAMED = 20


def _summary_key(record: Any) -> str | None:
    """The parts of ``record`` its summary depends on, as text (``repr``: cheaper than sorted
    JSON), so that cells with the same are summarised once; None: another shape."""
    if not isinstance(record, Mapping):
        return None
    reduced: dict[str, Any] = {"schema": record.get("schema")}
    for part, keys in _SUMMARY_PARTS.items():
        found = record.get(part)
        if not isinstance(found, Mapping):
            return None
        reduced[part] = {k: found[k] for k in keys if k in found}
    return repr(reduced)


def _provenance_section(sweep: SweepView, cells: Sequence[CellView]) -> str:
    groups: dict[tuple[str, ...], list[str]] = {}
    known: dict[str | None, dict[str, str]] = {}  # None: a record of another shape, not kept
    base = os.fspath(sweep.root)
    for cell in cells:
        path = os.path.join(base, cell.dir, PROVENANCE_FILE) if cell.dir else None
        record = read_json(path) if path is not None else None
        if path is None or (record is None and not os.path.lexists(path)):
            continue  # none yet (a refused or corrupt one is summarised, as unreadable)
        key = _summary_key(record)
        summary = known.get(key) or provenance_summary(record)
        if key is not None:
            known[key] = summary
        groups.setdefault(tuple(summary.values()), []).append(cell_label(cell))
    if not groups:
        return "<p>No cell has a provenance record yet.</p>"
    rows = []
    for values, labels in groups.items():
        who = f"all {len(labels)} cells" if len(groups) == 1 and len(labels) > 1 else ""
        more = f" and {len(labels) - _NAMED} more" if len(labels) > _NAMED else ""
        named = ", ".join(labels[:_NAMED]) + more
        rows.append([esc(who or named), *(esc(v) for v in values)])
    note = (
        "<p>Every cell has the same identity.</p>"
        if len(groups) == 1
        else f'<p class="verdict-bad">The cells differ: {len(groups)} identities.</p>'
    )
    return note + table(["cells", *provenance_summary(None)], rows)


def _sweep_table(results: ResultsTable, most: int = ROWS) -> str:
    errors = any(c.error_type or c.error_message for c in results.cells)
    headers = ["", "cell", *results.params, "state", *results.metrics, *(["error"] * errors)]
    rows, classes = [], []
    cells: Sequence[CellView] = results.cells
    note = ""
    if len(cells) > most:  # every row in the page, as a CSV link (nothing fetched)
        cells = top_cells(cells, most, results.best_metric, results.best_max)
        fields = ["dir", *results.params, "state", *results.metrics, "error", "best"]
        data = base64.b64encode(table_csv(table_records(results), fields).encode()).decode()
        by = results.best_metric
        which = f"the first {most}" if by is None else f"the best {most} by {esc(by)}"
        note = (
            f'<p class="more">{len(results.cells)} cells: the table shows {which}; every cell '
            'is in <a class="csv" download="cells.csv" href="data:text/csv;charset=utf-8;base64,'
            f'{data}">cells.csv</a> (in this page).</p>'
        )
    for cell in cells:
        error = " ".join(f"{cell.error_type or ''}: {cell.error_message or ''}".split()).strip(": ")
        row = [
            "★" if results.is_best(cell) else "",
            esc(cell_label(cell)),
            *(esc(format_param(cell.combo.get(p))) for p in results.params),
            f'<span class="state-{esc(cell.state)}">{esc(cell.state)}</span>',
            *(esc(cell_text(cell.metrics.get(m))) for m in results.metrics),  # None: -
            *([esc(error[:200] + ("…" if len(error) > 200 else ""))] * errors),
        ]
        rows.append(row)
        classes.append("best cell" if results.is_best(cell) else "cell")
    numeric = [False] * (3 + len(results.params)) + [True] * len(results.metrics)
    out = note + table(headers, rows, row_classes=classes, numeric=numeric, cls="sweep")
    if results.best_metric is not None:
        goal = "highest" if results.best_max else "lowest"
        if results.best is None:
            out += f"<p>best {esc(results.best_metric)} ({goal}): {esc(results.best_text)}</p>"
        else:
            value = cell_text(results.best.metrics[results.best_metric])
            out += (
                f"<p>★ best {esc(results.best_metric)} ({goal}): "
                f"<b>{esc(cell_label(results.best))}</b> = {esc(value)}{esc(results.best_text)}</p>"
            )
    return out


def _errors_section(sweep: SweepView, cells: Sequence[CellView], most: int = ROWS) -> str:
    parts = []
    failed = [c for c in cells if c.error_type or c.error_message]
    if len(failed) > most:
        parts.append(
            f'<p class="more">{len(failed)} cells failed: the first {most} are shown '
            "(mushin-box show DIR --where state=failed lists them all).</p>"
        )
    for cell in failed[:most]:
        head = f"{cell.error_type or cell.state}: {cell.error_message or ''}".strip()
        body = f"<h3>{esc(cell_label(cell))}: {esc(cell.state)}</h3><p>{esc(head)}</p>"
        # the page is made to be mailed: a symlink (to /etc/shadow), FIFO or device in the
        # file's place is refused, never embedded
        file = sweep.root / str(cell.dir) / ERROR_FILE
        try:
            tail = "\n".join(tail_lines(file, _ERROR_LINES, ERROR_TAIL_BYTES)) if cell.dir else None
        except FileNotFoundError:
            tail = None
        except OSError as exc:  # refused (UnsafeFileError), or unreadable
            warn_sidecar(f"{file} is not read ({exc}); the report leaves it out")
            tail = None
        if tail is not None:
            body += f'<p class="meta">{esc(file)} (last lines)</p>'
            body += f'<pre class="error">{esc(tail)}</pre>'
        parts.append(body)
    return "\n".join(parts) if parts else "<p>No cell failed.</p>"


def _other_curves(
    against: str | os.PathLike[str] | None, where: Sequence[str], shown: Sequence[CellView]
) -> Any:
    """The sweep ``--against`` names, and its curves, to overlay (None: not a sweep): its
    cells that pass ``where`` too (as ``show A B`` filters), else the counterparts of the
    cells ``shown``."""
    if against is None or not is_sweep_dir(Path(against)):
        return None
    other = read_results(against)
    if where:
        try:
            kept = {c.dir for c in results_table(other, where=where, config_keys="all").cells}
            cells = tuple(c for c in other.cells if c.dir is not None and c.dir in kept)
        except ResultsError:
            ids = {combo_id(c.combo) for c in shown}
            cells = tuple(c for c in other.cells if combo_id(c.combo) in ids)
        other = attrs.evolve(other, cells=cells)
    return Path(other.root).resolve().name, other, read_curves(other.root, other.cells)


def render_report(
    root: str | os.PathLike[str],
    *,
    against: str | os.PathLike[str] | None = None,
    best: str | None = None,
    sort: str | None = None,
    where: Sequence[str] = (),
    brief: bool = True,
    rows: int = ROWS,
    curves: int = CURVES,
) -> str:
    """The report of the sweep at ``root`` as HTML text.

    ``against``: another sweep or cell, whose reproducibility diff is added (``brief``: without
    the rows that differ between any two runs), a sweep's curves dashed on the same plots.
    ``best``, ``sort``, ``where``: as for ``mushin-box show`` (a ``ResultsError`` when they
    name nothing). ``rows``, ``curves``: the most table rows, and cells drawn as lines.
    """
    sweep = read_results(root)
    results = results_table(sweep, best=best, sort=sort, where=where)
    series = read_curves(sweep.root, results.cells)
    other = _other_curves(against, where, results.cells)
    name = Path(sweep.root).resolve().name
    counts = ", ".join(f"{n} {state}" for state, n in sweep.counts().items())
    sections = [
        f"<h1>Sweep {esc(name)}</h1>",
        f'<p class="meta"><code>{esc(Path(sweep.root).resolve())}</code> · {esc(counts)} · '
        f"written by mushin-box {esc(__version__)}</p>",
        "<h2>Cells</h2>",
        _sweep_table(results, rows),
        *(_config_section(sweep, other[0], other[1]) if other is not None else []),
        *(["<h2>Grid</h2>", grid] if (grid := heatmap_section(results, series)) else []),
        "<h2>Curves</h2>",
        curves_section(results, series, other, most=curves, name=name),
        "<h2>Errors</h2>",
        _errors_section(sweep, results.cells, rows),
        "<h2>Provenance</h2>",
        _provenance_section(sweep, results.cells),
    ]
    if against is not None:
        diff = diff_provenance(sweep.root, Path(against))
        if where and diff.kind == "sweep":  # the filters apply to both sides: pairs shown
            shown = [*results.cells, *(other[1].cells if other else ())]
            names = {combo_id(redact(dict(c.combo))) for c in shown}
            diff = attrs.evolve(diff, cells=tuple(c for c in diff.cells if c.name in names))
        sections += ["<h2>Reproducibility diff</h2>", diff_html_section(diff, brief=brief)]
    return page(f"mushin-box report: {name}", "\n".join(sections))


def _config_section(sweep: SweepView, name: str, other: SweepView) -> list[str]:
    """The config keys, swept by neither, whose values differ between ``sweep`` and the
    ``--against`` sweep: a difference in results may come from them."""
    configs = (sweep_config(sweep), sweep_config(other))
    if not all(configs):
        return []
    keys = changed_keys(configs, (*sweep.params, *other.params))
    if not keys:
        return ["<p>No config key the sweeps do not sweep differs from --against's.</p>"]
    missing = "(not set)"
    rows = [
        [esc(k), *(esc(format_param(c[k]) if k in c else missing) for c in configs)] for k in keys
    ]
    heading = f"<h2>Config that differs from {esc(name)} (--against)</h2>"
    return [heading, table(["key", "this sweep", esc(name)], rows)]


#: per cell: series name -> (index dimension, index, values)
Curves = list[dict[str, PlainSeries]]
#: the ``--against`` sweep's name, view and curves
_Other = tuple[str, SweepView, Curves]


def short_labels(cells: Sequence[CellView]) -> list[str]:
    """Each cell's name in a legend: the swept values that differ between the cells.

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


#: per plot: the x and y lists of the cells drawn as a band, not as lines
_Rest = dict[str, tuple[list[list[float]], list[list[float]]]]


def _lines(
    results: ResultsTable, curves: Curves, other: _Other | None, drawn: set[int] | None
) -> tuple[dict[str, list[Line]], dict[str, str], _Rest]:
    """The lines of each plot, their x labels, and the series of the cells not ``drawn``
    (ids; None: all), for the band."""
    plots: dict[str, list[Line]] = {}
    xlabels: dict[str, str] = {}
    rest: _Rest = {}
    ids = {combo_id(c.combo) for c in results.cells}
    # --against's cells the sweep lacks are named by the same keys as its own
    only = [c for c in other[1].cells if combo_id(c.combo) not in ids] if other else []
    cells = [*results.cells, *only]
    # a cell and its counterpart: one label, one colour, one emphasis
    pens = [
        (label, color(i), ("best" if results.is_best(c) else "faded") if results.best else "")
        for i, (c, label) in enumerate(zip(cells, short_labels(cells), strict=True))
    ]
    sides = [(*side, "") for side in zip(results.cells, pens, curves, strict=False)]
    if other is not None:  # the counterpart's pen: the one of the same swept values
        pens_of = {combo_id(c.combo): pen for c, pen in zip(cells, pens, strict=True)}
        pairs = zip(other[1].cells, other[2], strict=True)
        sides += [(c, pens_of[combo_id(c.combo)], found, other[0]) for c, found in pairs]
    for cell, (label, colour, emphasis), found, sweep in sides:
        for name, (dim, index, values) in found.items():
            xlabels[name] = dim.replace("_", " ")  # a stage's: the same for every cell
            if not sweep and drawn is not None and id(cell) not in drawn:
                xs, ys = rest.setdefault(name, ([], []))
                xs.append(index)
                ys.append(values)
                continue
            line = Line(label, colour, index, values, emphasis, sweep)
            plots.setdefault(name, []).append(line)
    return plots, xlabels, rest


def _figure(
    number: int, name: str, lines: list[Line], xlabel: str, band: Band | None, mine: str
) -> str:
    scaled = [*lines, *([Line("", "", band[0], ys) for ys in band[1:3]] if band else [])]
    log = wants_log(scaled)
    default = line_plot(lines, xlabel=xlabel, title=name, log=log, band=band)
    if not log_possible(scaled):  # a value <= 0: no log axis to offer
        variants, toggle = f'<div class="scale">{default}</div>', ""
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
    return (
        f'<figure class="plot" data-metric="{esc(name)}" '
        f'data-scale="{"log" if log else "linear"}">{toggle}'
        f"<figcaption>{esc(name)}</figcaption>{variants}{_legend(lines, band, mine)}</figure>"
    )


def _legend(lines: Sequence[Line], band: Band | None = None, mine: str = "") -> str:
    """One entry per cell, or per pair of a cell and its ``--against`` counterpart."""
    spans = []
    if band is not None:
        spans.append(f'<span class="band"><span class="swatch band"></span>{esc(band[3])}</span>')
    pairs: dict[tuple[str, str], list[Line]] = {}
    for line in lines:
        pairs.setdefault((line.label, line.color), []).append(line)
    against = any(line.sweep for line in lines)
    for (label, colour), pair in pairs.items():
        sides = [f"solid: {mine}"] * any(not x.sweep for x in pair)
        sides += [f"dashed: {x.sweep}" for x in pair if x.sweep][:1]
        cls = " best" if pair[0].emphasis == "best" else ""
        swatches = "".join(
            f'<span class="swatch{" dashed" * bool(x.sweep)}" style="--c:{colour}"></span>'
            for x in pair[:2]
        )
        text = f"{label} ({', '.join(sides)})" if against else label
        spans.append(f'<span class="entry{cls}" data-color="{colour}">{swatches}{esc(text)}</span>')
    return f'<div class="legend">{"".join(spans)}</div>'


def curves_section(
    results: ResultsTable, curves: Curves, other: _Other | None, most: int, name: str
) -> str:
    """The plots (HTML), or a note saying how to record series when no cell has one;
    past ``most`` cells with series, the ``most`` best are lines and the rest one band."""
    drawn = None
    with_series = [c for c, found in zip(results.cells, curves, strict=True) if found]
    if len(with_series) > most:
        drawn = {id(c) for c in top_cells(with_series, most, results.best_metric, results.best_max)}
    plots, xlabels, rest = _lines(results, curves, other, drawn)
    bands: dict[str, Band] = {
        name: (*band(*found), f"the other {len(found[0])} cells: lowest to highest")
        for name, found in rest.items()
    }
    if not plots and not bands:
        return (
            '<p class="note">No curves: no cell holds a MetricsCallback series '
            "(<code>fit_metrics.json</code>). Add <code>mushin_box.MetricsCallback</code> to "
            "the trainer's callbacks to record one per epoch.</p>"
        )
    keys = sorted({*plots, *bands}, key=lambda n: (not n.startswith("fit."), n))
    figures = [
        _figure(i, key, plots.get(key, []), xlabels[key], bands.get(key), name)
        for i, key in enumerate(keys)
    ]
    return f'<div class="plots">{"".join(figures)}</div>'


def _grid_values(cells: Sequence[CellView], param: str) -> list[str]:
    values = list(dict.fromkeys(format_param(c.combo[param]) for c in cells if param in c.combo))
    try:
        return sorted(values, key=float)
    except ValueError:
        return values  # not numbers: grid order


def _heat_metric(results: ResultsTable, curves: Curves) -> tuple[str, list[float]] | None:
    """The metric the heatmap shows (``--best``'s, else the first scalar that varies, else the
    first series' last value), and its value per cell (NaN: none)."""
    names = [results.best_metric] if results.best_metric else []
    for name in [*names, *results.metrics]:
        values = [c.metrics.get(name, math.nan) for c in results.cells]
        if len({v for v in values if math.isfinite(v)}) > 1 or name in names:
            return name, values
    series = sorted({n for found in curves for n in found}, key=lambda n: (n[:4] != "fit.", n))
    if not series:
        return None
    name = series[0]
    values = [
        reduce_series(found[name][2], "last") if name in found else math.nan for found in curves
    ]
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
    rows, columns = (_grid_values(results.cells, p) for p in varying)
    svg = heatmap_svg(rows, columns, grid, ylabel=ylabel, xlabel=xlabel, metric=metric, best=best)
    return f'<figure class="heatmap" data-metric="{esc(metric)}">{svg}</figure>'


def top_cells(
    cells: Sequence[CellView], n: int, metric: str | None, highest: bool
) -> list[CellView]:
    """The ``n`` best cells by ``metric`` (no finite value: last, in order), else the first."""
    if metric is None:
        return list(cells[:n])

    def rank(cell: CellView) -> tuple[bool, float]:  # a stable sort: ties keep their order
        value = cell.metrics.get(metric, math.nan)
        missing = not math.isfinite(value)
        return missing, 0.0 if missing else (-value if highest else value)

    return sorted(cells, key=rank)[:n]


def table_csv(records: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    """The rows as ``mushin-box show --csv`` prints them."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    for record in records:  # None: "" (the csv module's rule)
        texts = {
            k: json.dumps(v, sort_keys=True)
            for k, v in record.items()
            if isinstance(v, list | dict)
        }
        writer.writerow({**record, **texts})
    return out.getvalue()


def band(
    xss: Sequence[Sequence[float]], yss: Sequence[Sequence[float]]
) -> tuple[list[float], list[float], list[float]]:
    """(x, lowest, highest) over several curves' finite values, in increasing x."""
    at: dict[float, list[float]] = {}
    for xs, ys in zip(xss, yss, strict=True):
        for x, y in zip(xs, ys, strict=False):
            if math.isfinite(x) and math.isfinite(y):
                at.setdefault(x, []).append(y)
    xs = sorted(at)
    return xs, [min(at[x]) for x in xs], [max(at[x]) for x in xs]


def provenance_summary(record: Mapping[str, Any] | None) -> dict[str, str]:
    """The fields of a provenance record a report shows, as text (``-`` where absent).

    >>> rec = {"reproducibility": {"image": "no image", "code": {"git": {"commit": "ab" * 20,
    ...        "dirty": True}}, "package_set": {"sha256": "c" * 64, "count": 62},
    ...        "seed": {"base": 1234}}, "run": {"topology": {"num_nodes": 1, "world_size": 2}}}
    >>> provenance_summary(rec)["code"], provenance_summary(rec)["topology"]
    ('abababababab (dirty)', '1 node × 2 ranks')
    """
    record = record if isinstance(record, Mapping) else {}  # none: every field "-"
    try:
        full = split_provenance(record)
    except Exception:  # a record of an unknown shape: show what is there
        full = dict(record)
    repro, run = full.get("reproducibility") or {}, full.get("run") or {}
    image = repro.get("image")
    if isinstance(image, Mapping):
        image_text = short(image.get("sif_sha256") or image.get("sif_uuid") or "?")
        if image.get("sif_uuid") and image.get("sif_sha256"):
            image_text += f" (uuid {image['sif_uuid']})"
    else:
        image_text = "-" if image is None else str(image)
    code = repro.get("code")
    git = _get(code, "git")
    if _get(git, "commit"):
        code_text = short(git["commit"]) + (" (dirty)" if git.get("dirty") else "")
    elif isinstance(code, Mapping):
        code_text = "no git; task " + short(code.get("task_sha256"))
    else:
        code_text = short(code)
    packages, topo = repro.get("package_set"), run.get("topology")
    nodes, world = _get(topo, "num_nodes"), _get(topo, "world_size")
    topology = f"{nodes} node{'s' if nodes != 1 else ''} × {world} rank{'s' if world != 1 else ''}"
    base = _get(repro.get("seed"), "base")
    return {
        "experiment": str(_get(run.get("experiment"), "file") or "-"),
        "code": code_text,
        "image": image_text,
        "packages": (
            f"{short(packages.get('sha256'))} ({packages.get('count', '?')} pkgs)"
            if isinstance(packages, Mapping)
            else "-"
        ),
        "seed base": "-" if base is None else str(base),
        "topology": "-" if nodes is None and world is None else topology,
    }


def _get(value: Any, key: str) -> Any:
    """``value[key]`` where ``value`` is a mapping that has it, else None."""
    return value.get(key) if isinstance(value, Mapping) else None


def code_line(sweep: SweepView) -> str | None:
    """``show``'s line naming the experiment and commit of the first cell with a record."""
    for cell in sweep.cells:
        path = sweep.root / cell.dir / PROVENANCE_FILE if cell.dir else None
        if path is not None and os.path.lexists(path):  # a link is refused, and said so
            summary = provenance_summary(read_json(path))
            where = f"experiment {summary['experiment']}, " if summary["experiment"] != "-" else ""
            return f"{where}code {summary['code']}"
    return None

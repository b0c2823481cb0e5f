# SPDX-License-Identifier: MIT
"""``mushin-box report``: a sweep as one self-contained HTML page.

The page holds the sweep table (the best cell marked), a heatmap of a 2-parameter grid,
every ``MetricsCallback`` series as curves (one plot per metric, one line per cell, the best
bold, a log axis where one cell would flatten the rest, the ``--against`` sweep dashed:
:mod:`mushin_box._results.curves`), each failed cell's error, the provenance summary (image
identity, code commit and dirty flag, package-set fingerprint, seed base, topology), and
optionally the reproducibility diff against another run or sweep, breaks first.

Everything is read from the sidecars (:func:`~mushin_box._sweepdir.board.read_sweep`, the
``*_metrics.json`` series, ``mushin_provenance.json``) without importing torch, and the page
fetches nothing (:mod:`mushin_box._results.htmlpage`): it can be mailed, or opened from a
shared drive on a machine without internet access.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.layout import ERROR_FILE, ERROR_TAIL_BYTES, PROVENANCE_FILE
from mushin_box._results.curves import curves_section, heatmap_section, read_curves
from mushin_box._results.finished import read_results
from mushin_box._results.htmlpage import esc, page, table
from mushin_box._results.manycells import CURVES, ROWS, top_cells
from mushin_box._results.provsummary import provenance_summary
from mushin_box._results.table import (
    ResultsTable,
    cell_label,
    cell_text,
    format_param,
    results_table,
)
from mushin_box._sweepdir.board import CellView, SweepView

__all__ = ["render_report"]

_ERROR_LINES = 40  # last lines of a cell's error file shown


#: the parts of a provenance record its summary reads (the rest differs per cell)
_SUMMARY_PARTS = {
    "reproducibility": ("image", "code", "package_set", "seed", "seed_base"),
    "run": ("topology", "experiment", "time"),
}
#: the most cells named in a row of the provenance table (the rest are counted)
_NAMED = 20


def _summary_key(record: Any) -> str | None:
    """The parts of ``record`` its summary depends on, as text: cells with the same are
    summarised once (the summary redacts and splits the record: 3 ms, so 30 s at 10,000
    cells). None: a record of another shape, summarised whole. The text is the parts'
    ``repr``: equal only for equal JSON values (and a record written with its keys in
    another order only costs one more summary), a fifth faster than sorted JSON."""
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
    from mushin_box._sweepdir.settled import read_object

    groups: dict[tuple[str, ...], list[str]] = {}
    columns: list[str] = []
    known: dict[str, dict[str, str]] = {}
    base = os.fspath(sweep.root)
    for cell in cells:
        path = os.path.join(base, cell.dir, PROVENANCE_FILE) if cell.dir else None
        record = read_object(path) if path is not None else None
        if path is None or (record is None and not os.path.lexists(path)):
            continue  # none yet (a refused or corrupt one is summarised, as unreadable)
        key = _summary_key(record)
        summary = known.get(key) if key is not None else None
        if summary is None:
            summary = provenance_summary(record)
            if key is not None:
                known[key] = summary
        columns = list(summary)
        groups.setdefault(tuple(summary.values()), []).append(cell_label(cell))
    if not groups:
        return "<p>No cell has a provenance record yet.</p>"
    rows = []
    for values, labels in groups.items():
        who = f"all {len(labels)} cells" if len(groups) == 1 and len(labels) > 1 else ""
        named = ", ".join(labels[:_NAMED])
        if len(labels) > _NAMED:
            named += f" and {len(labels) - _NAMED} more"
        rows.append([esc(who or named), *(esc(v) for v in values)])
    note = (
        "<p>Every cell has the same identity.</p>"
        if len(groups) == 1
        else f'<p class="verdict-bad">The cells differ: {len(groups)} identities.</p>'
    )
    return note + table(["cells", *columns], rows)


# ---------------------------------------------------------------------------- table


def _csv_note(results: ResultsTable, shown: int) -> str:
    """Above a table cut to ``shown`` rows: which rows, and every row as a CSV link."""
    from mushin_box._results.manycells import csv_link, table_csv
    from mushin_box._results.table import table_records

    fields = ["dir", *results.params, "state", *results.metrics, "error", "best"]
    link = csv_link(table_csv(table_records(results), fields), "cells.csv", "cells.csv")
    which = (
        f"the best {shown} by {esc(results.best_metric)}"
        if results.best_metric is not None
        else f"the first {shown}"
    )
    return (
        f'<p class="more">{len(results.cells)} cells: the table shows {which}; every cell '
        f"is in {link} (in this page).</p>"
    )


def _sweep_table(results: ResultsTable, most: int = ROWS) -> str:
    errors = any(c.error_type or c.error_message for c in results.cells)
    headers = ["", "cell", *results.params, "state", *results.metrics, *(["error"] * errors)]
    rows, classes = [], []
    cells: Sequence[CellView] = results.cells
    note = ""
    if len(cells) > most:
        cells = top_cells(cells, most, results.best_metric, results.best_max)
        note = _csv_note(results, most)
    for cell in cells:
        error = " ".join(f"{cell.error_type or ''}: {cell.error_message or ''}".split())
        error = error.strip(": ")
        rows.append(
            [
                "★" if results.is_best(cell) else "",
                esc(cell_label(cell)),
                *(esc(format_param(cell.combo.get(p))) for p in results.params),
                f'<span class="state-{esc(cell.state)}">{esc(cell.state)}</span>',
                *(
                    esc(cell_text(cell.metrics[m])) if m in cell.metrics else "-"
                    for m in results.metrics
                ),
                *([esc(error[:200] + ("…" if len(error) > 200 else ""))] * errors),
            ]
        )
        classes.append("best cell" if results.is_best(cell) else "cell")
    numeric = [False] * (3 + len(results.params)) + [True] * len(results.metrics)
    out = note + table(headers, rows, row_classes=classes, numeric=numeric, cls="sweep")
    if results.best_metric is not None:
        goal = "highest" if results.best_max else "lowest"
        if results.best is None:
            out += f"<p>best {esc(results.best_metric)} ({goal}): no cell has a value</p>"
        else:
            value = cell_text(results.best.metrics[results.best_metric])
            out += (
                f"<p>★ best {esc(results.best_metric)} ({goal}): "
                f"<b>{esc(cell_label(results.best))}</b> = {esc(value)}</p>"
            )
    return out


def _error_tail(file: Path) -> str | None:
    """The last lines of a cell's traceback, read from its end (bounded), or None. The
    page is made to be mailed: a symlink (to ``/etc/shadow``), a FIFO or a device in its
    place is refused with a warning, never embedded."""
    from mushin_box._core.safeio import read_tail
    from mushin_box._core.sidecars import warn_sidecar

    try:
        data, skipped = read_tail(file, ERROR_TAIL_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:  # refused (UnsafeFileError), or unreadable
        warn_sidecar(f"{file} is not read ({exc}); the report leaves it out")
        return None
    lines = data.decode("utf-8", "replace").splitlines()[1 if skipped else 0 :]
    return "\n".join(lines[-_ERROR_LINES:])


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
        file = sweep.root / cell.dir / ERROR_FILE if cell.dir else None
        tail = _error_tail(file) if file is not None else None
        if tail is not None:
            body += f'<p class="meta">{esc(file)} (last lines)</p>'
            body += f'<pre class="error">{esc(tail)}</pre>'
        parts.append(body)
    return "\n".join(parts) if parts else "<p>No cell failed.</p>"


# ---------------------------------------------------------------------------- page


def _other_curves(against: str | os.PathLike[str] | None) -> Any:
    """The sweep ``--against`` names, with its curves, to overlay (None: not a sweep; a
    cell is compared in the diff only)."""
    from mushin_box._sweepdir.manifest import is_sweep_dir

    if against is None or not is_sweep_dir(Path(against)):
        return None
    other = read_results(against)
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
    """The report of the sweep at ``root`` as HTML text (see module doc).

    Parameters
    ----------
    root : path
        A sweep directory.
    against : path, optional
        Another sweep (or, with ``root`` a cell, a cell): its reproducibility diff is added,
        and a sweep's curves are drawn dashed on the same plots.
    best, sort, where
        As for ``mushin-box show`` (:func:`~mushin_box._results.table.results_table`).
    brief : bool
        Hide the diff's rows that differ between any two runs.
    rows, curves : int
        Past ``rows`` cells the table shows the best ``rows`` and links every cell as CSV;
        past ``curves`` cells with series each plot draws the best ``curves`` as lines and
        the rest as a band (:mod:`~mushin_box._results.manycells`).

    Raises
    ------
    mushin_box._results.table.ResultsError
        ``best``/``sort``/``where`` name nothing in the sweep.
    mushin_box._results.diff.DiffInputError
        ``against`` is not a sweep or cell comparable with ``root``.
    """
    from mushin_box._core.version import __version__

    sweep = read_results(root)
    results = results_table(sweep, best=best, sort=sort, where=where)
    series = read_curves(sweep.root, results.cells)
    other = _other_curves(against)
    counts = ", ".join(f"{n} {state}" for state, n in sweep.counts().items())
    sections = [
        f"<h1>Sweep {esc(Path(sweep.root).resolve().name)}</h1>",
        f'<p class="meta"><code>{esc(Path(sweep.root).resolve())}</code> · {esc(counts)} · '
        f"written by mushin-box {esc(__version__)}</p>",
        "<h2>Cells</h2>",
        _sweep_table(results, rows),
        *(["<h2>Grid</h2>", grid] if (grid := heatmap_section(results, series)) else []),
        "<h2>Curves</h2>",
        curves_section(results, series, other, most=curves),
        "<h2>Errors</h2>",
        _errors_section(sweep, results.cells, rows),
        "<h2>Provenance</h2>",
        _provenance_section(sweep, results.cells),
    ]
    if against is not None:
        from mushin_box._results.diff import diff_provenance
        from mushin_box._results.diffview import diff_html_section

        diff = diff_provenance(sweep.root, Path(against))
        sections += ["<h2>Reproducibility diff</h2>", diff_html_section(diff, brief=brief)]
    return page(f"mushin-box report: {Path(sweep.root).resolve().name}", "\n".join(sections))

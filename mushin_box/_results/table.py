# SPDX-License-Identifier: MIT
"""A sweep's results as a table: which cells, in what order, which is best.

``mushin-box show`` and ``mushin-box report`` print what :func:`results_table` selects from
a :class:`~mushin_box._sweepdir.board.SweepView` (the sidecars, read once): one row per cell
(swept values, state, the scalar metrics its task returned, its error), filtered by
``--where``, ordered by ``--sort``, the best cell by ``--best`` marked. Nothing here reads
a file or imports torch.

Examples
--------
>>> from pathlib import Path
>>> from mushin_box._sweepdir.board import CellView, SweepView
>>> cells = tuple(
...     CellView(dir=f"lr={lr}", combo={"lr": lr}, state="completed",
...              recorded_state="completed", metrics={"val_loss": loss})
...     for lr, loss in ((0.01, 0.9), (0.1, 0.2), (1.0, 0.5)))
>>> sweep = SweepView(root=Path("."), params=("lr",), cells=cells)
>>> t = results_table(sweep, best="val_loss")
>>> t.best.dir, [c.dir for c in t.cells]
('lr=0.1', ['lr=0.01', 'lr=0.1', 'lr=1.0'])
>>> [c.dir for c in results_table(sweep, sort="val_loss:desc", where=["lr=0.1,1.0"]).cells]
['lr=1.0', 'lr=0.1']
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from mushin_box._sweepdir.board import CellView, SweepView

__all__ = [
    "ResultsError",
    "ResultsTable",
    "cell_label",
    "format_param",
    "cell_text",
    "results_table",
    "summary",
    "table_records",
]

#: what ``--where`` can filter on besides the swept parameters
STATE_KEY = "state"


class ResultsError(ValueError):
    """A ``--where``, ``--sort`` or ``--best`` that names nothing in the sweep."""


@attrs.frozen
class ResultsTable:
    """The cells to show, in order, and the best of them (``None``: not asked, or no cell
    has a finite value of that metric)."""

    sweep: SweepView
    params: tuple[str, ...]
    metrics: tuple[str, ...]
    cells: tuple[CellView, ...]
    best: CellView | None = None
    best_metric: str | None = None
    best_max: bool = False

    def is_best(self, cell: CellView) -> bool:
        return self.best is not None and cell is self.best


def cell_text(value: Any) -> str:
    """A swept value or metric as table text, in every table the kit prints (``status``,
    ``show``, ``report``, ``diff``): floats with 6 significant digits, ``-`` for none.

    Examples
    --------
    >>> cell_text(0.123456789), cell_text(float("nan")), cell_text(None), cell_text([1, "a"])
    ('0.123457', 'nan', '-', '[1, "a"]')
    """
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def format_param(value: Any) -> str:
    """A swept value as table text, as the override wrote it (``1.0``, not ``1``)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def cell_label(cell: CellView) -> str:
    """A cell's name in tables and legends: its directory (``lr=0.1``), or ``run`` for
    a run without swept values."""
    if not cell.combo:
        return "run"
    return cell.dir or ",".join(f"{k}={format_param(v)}" for k, v in cell.combo.items())


def _split(spec: str, suffixes: Sequence[str]) -> tuple[str, str | None]:
    name, sep, suffix = spec.rpartition(":")
    if sep and suffix in suffixes and name:
        return name, suffix
    return spec, None


def _where(specs: Sequence[str], params: Sequence[str]) -> list[tuple[str, list[Any], str]]:
    from mushin_box._core.overrides import parse_sweep_values

    out = []
    keys = [*params, STATE_KEY]
    for spec in specs:
        key, sep, text = spec.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ResultsError(f"--where {spec!r}: expected KEY=VALUE, e.g. --where lr=0.1")
        if key not in keys:
            raise ResultsError(
                f"--where {spec!r}: {key!r} is not a swept parameter of this sweep; "
                f"use one of: {', '.join(keys)}"
            )
        try:
            values = parse_sweep_values(text, keep_interpolations=True)
        except ValueError:
            values = [text]
        if key == STATE_KEY:  # a misspelt state would show an empty table, as if none
            _check_states(spec, values)
        out.append((key, values, text))
    return out


def _check_states(spec: str, values: Sequence[Any]) -> None:
    from mushin_box._sweepdir.board import VIEW_STATES  # as a reader shows them

    unknown = [v for v in values if v not in VIEW_STATES]
    if unknown:
        raise ResultsError(
            f"--where {spec!r}: {cell_text(unknown[0])!r} is not a cell state; use one of: "
            f"{', '.join(VIEW_STATES)}"
        )


def _matches(cell: CellView, key: str, values: list[Any], text: str) -> bool:
    actual = cell.state if key == STATE_KEY else cell.combo.get(key)
    shown = cell_text(actual)
    for value in values:
        same_type = isinstance(actual, bool) == isinstance(value, bool)
        if (same_type and actual == value) or shown == cell_text(value):
            return True
    return shown == text


def _metric(cell: CellView, name: str) -> float:
    value = cell.metrics.get(name, math.nan)
    return value if math.isfinite(value) else math.nan


def _check_metric(name: str, metrics: Sequence[str], option: str) -> None:
    if name not in metrics:
        have = ", ".join(metrics) or "none (no cell has completed with metrics)"
        raise ResultsError(
            f"{option} {name!r}: no cell has a scalar metric {name!r}; the metrics are: {have}"
        )


def _sort_key(params: Sequence[str], name: str) -> Any:
    if name == STATE_KEY:
        return lambda c: (c.state,)
    if name in params:
        return lambda c: (cell_text(c.combo.get(name)),)
    return None


def results_table(
    sweep: SweepView,
    *,
    where: Sequence[str] = (),
    sort: str | None = None,
    best: str | None = None,
) -> ResultsTable:
    """Select, order and mark a sweep's cells.

    Parameters
    ----------
    sweep : SweepView
        The sweep, as :func:`~mushin_box._sweepdir.board.read_sweep` read it.
    where : sequence of str
        ``KEY=VALUE`` filters, all of which a cell must match: ``KEY`` a swept parameter or
        ``state``, ``VALUE`` one value or several (``lr=0.1,1.0``), as in an override.
    sort : str, optional
        A metric (``val_loss``, lowest first; ``val_loss:desc``, highest first; cells
        without it last), a swept parameter, or ``state``. Default: grid order.
    best : str, optional
        Mark the cell with the lowest value of this metric (``acc:max``: the highest).

    Raises
    ------
    ResultsError
        A filter, sort or best names no parameter or metric of the sweep.
    """
    params = tuple(sweep.params)
    metrics = tuple(sorted({name for c in sweep.cells for name in c.metrics}))
    cells = list(sweep.cells)
    for key, values, text in _where(where, params):
        cells = [c for c in cells if _matches(c, key, values, text)]
    if sort:
        name, order = _split(sort, ("asc", "desc"))
        descending = order == "desc"
        by_param = _sort_key(params, name)
        if by_param is not None:
            cells.sort(key=by_param, reverse=descending)
        else:
            _check_metric(name, metrics, "--sort")
            present = [c for c in cells if not math.isnan(_metric(c, name))]
            absent = [c for c in cells if math.isnan(_metric(c, name))]
            present.sort(key=lambda c: _metric(c, name), reverse=descending)
            cells = present + absent
    best_cell, best_name, best_max = None, None, False
    if best:
        best_name, goal = _split(best, ("min", "max"))
        best_max = goal == "max"
        _check_metric(best_name, metrics, "--best")
        ranked = [c for c in cells if not math.isnan(_metric(c, best_name))]
        if ranked:
            pick = max if best_max else min
            best_cell = pick(ranked, key=lambda c: _metric(c, best_name))
    return ResultsTable(
        sweep=sweep,
        params=params,
        metrics=metrics,
        cells=tuple(cells),
        best=best_cell,
        best_metric=best_name,
        best_max=best_max,
    )


def _error_text(cell: CellView) -> str:
    if not cell.error_type and not cell.error_message:
        return ""
    return " ".join(f"{cell.error_type or 'Error'}: {cell.error_message or ''}".split())


def table_records(table: ResultsTable) -> list[dict[str, Any]]:
    """One flat record per row (``dir``, the swept values, ``state``, the metrics,
    ``error``, ``best``): what ``--csv``, ``--md`` and ``--json`` print."""
    records = []
    for cell in table.cells:
        record: dict[str, Any] = {"dir": cell.dir, "label": cell_label(cell)}
        record.update({p: cell.combo.get(p) for p in table.params})
        record["state"] = cell.state
        record.update({m: cell.metrics.get(m) for m in table.metrics})
        record["error"] = _error_text(cell) or None
        record["best"] = table.is_best(cell)
        records.append(record)
    return records


def summary(table: ResultsTable) -> Mapping[str, Any]:
    """What ``--json`` prints besides the rows."""
    best = table.best
    return {
        "sweep": str(table.sweep.root),
        "params": list(table.params),
        "metrics": list(table.metrics),
        "counts": table.sweep.counts(),
        "best": None
        if table.best_metric is None
        else {
            "metric": table.best_metric,
            "goal": "max" if table.best_max else "min",
            "dir": best.dir if best else None,
            "value": best.metrics.get(table.best_metric) if best else None,
        },
    }

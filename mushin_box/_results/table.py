# SPDX-License-Identifier: MIT
"""A sweep's results as a table (``show``, ``report``): one row per cell, filtered by
``--where``, ordered by ``--sort``, the best cell by ``--best`` marked; a finished sweep
read from its manifest and one metrics file per completed cell (:func:`read_finished`).

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
>>> import tempfile
>>> from mushin_box._core.sidecars import write_json_atomic
>>> root = Path(tempfile.mkdtemp())
>>> write_json_atomic(root / "lr=0.1" / "mushin_status.json",
...                   {"combo": {"lr": 0.1}, "status": "completed"})
>>> write_json_atomic(root / "lr=0.1" / "mushin_metrics.json", {"loss": 0.5})
>>> write_json_atomic(root / "mushin_sweep.json", {"grid": {"lr": [0.1]}, "params": ["lr"],
...     "cells": {'{"lr":0.1}': {"combo": {"lr": 0.1}, "status": "completed", "dir": "lr=0.1"}}})
>>> [(c.dir, c.state, c.metrics) for c in read_finished(root).cells]
[('lr=0.1', 'completed', {'loss': 0.5})]
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.gcpause import gc_paused
from mushin_box._core.layout import PROVENANCE_FILE
from mushin_box._core.overrides import parse_sweep_values
from mushin_box._core.safeio import UnsafeFileError
from mushin_box._core.sidecars import read_json
from mushin_box._core.targets import public
from mushin_box._provenance.full import split_provenance
from mushin_box._results.series import (
    MetricNameError,
    MetricSpec,
    SeriesFileError,
    SeriesReader,
    parse_metric,
)
from mushin_box._sweepdir.board import (
    VIEW_STATES,  # as a reader shows them
    CellView,
    SweepView,
    cell_view,
    read_sweep,
)
from mushin_box._sweepdir.settled import Heading, bare_view, finished_entries

#: what ``--where`` can filter on besides the swept parameters (``sweep``: across sweeps)
STATE_KEY = "state"
SWEEP_KEY = "sweep"
#: a row while the table is built: (index of its sweep, cell)
_Row = tuple[int, CellView]


@public
class ResultsError(MushinBoxError, ValueError):
    """A ``--where``, ``--sort`` or ``--best`` that names nothing in the sweep."""


@attrs.frozen
class ResultsTable:
    """The cells to show, in order, and the best of them (``None``: not asked, or no cell
    has a finite value). Across sweeps: every sweep, its name, and each cell's sweep."""

    sweep: SweepView
    params: tuple[str, ...]
    metrics: tuple[str, ...]
    cells: tuple[CellView, ...]
    best: CellView | None = None
    best_metric: str | None = None
    best_max: bool = False
    sweeps: tuple[SweepView, ...] = ()
    names: tuple[str, ...] = ()
    origins: tuple[int, ...] = ()
    #: the cells whose value of the best metric is not finite (inf, nan): never the best
    unranked: int = 0
    #: each sweep's config (:func:`sweep_config`), read only across sweeps or for every key
    configs: tuple[dict[str, Any], ...] = ()

    def row_configs(self) -> list[dict[str, Any]]:
        """Each row's whole config, as dotted keys: its sweep's, with its own values."""
        configs = self.configs or (sweep_config(self.sweep),)
        at = self.origins if self.names else [0] * len(self.cells)
        return [{**configs[i], **cell.combo} for i, cell in zip(at, self.cells, strict=True)]

    def is_best(self, cell: CellView) -> bool:
        return self.best is not None and cell is self.best

    @property
    def best_text(self) -> str:
        """What the best line says after its metric and value."""
        left = f" ({self.unranked} at inf or nan left out)" if self.unranked else ""
        return ("no cell has a finite value" if self.best is None else "") + left

    def sweep_name(self, at: int) -> str | None:
        """The name of the sweep row ``at`` comes from (None: a one-sweep table)."""
        return self.names[self.origins[at]] if self.names else None


def cell_text(value: Any) -> str:
    """A swept value or metric as every table prints it: floats with 6 significant digits,
    ``-`` for none.

    >>> cell_text(0.123456789), cell_text(float("nan")), cell_text(None), cell_text([1, "a"])
    ('0.123457', 'nan', '-', '[1, "a"]')
    """
    if value is None:
        return "-"
    if type(value) is int:
        return str(value)  # json.dumps's text, without its encoder (10,000 cells)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def format_param(value: Any) -> str:
    """A swept value as table text, as the override wrote it (``1.0``, not ``1``).

    >>> format_param(1), format_param(1.0), format_param(float("inf")), format_param([2, "a"])
    ('1', '1.0', 'Infinity', '[2, "a"]')
    """
    kind = type(value)
    if kind is str:
        return value
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)  # what json.dumps writes, without its encoder (10,000 rows)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def cell_label(cell: CellView) -> str:
    """A cell's name in tables and legends: its directory (``cell``: a sweep that sweeps none)."""
    if not cell.combo:
        return "cell"
    return cell.dir or ",".join(f"{k}={format_param(v)}" for k, v in cell.combo.items())


def _where(specs: Sequence[str], keys: Sequence[str]) -> list[tuple[str, list[Any], str]]:
    out = []
    for spec in specs:
        key, sep, text = spec.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ResultsError(f"--where {spec!r}: expected KEY=VALUE, e.g. --where lr=0.1")
        # status's headers name a parameter by its last part where that is unique (lr)
        short = [k for k in keys if k.rsplit(".", 1)[-1] == key]
        if key not in keys and len(short) == 1:
            key = short[0]
        elif key not in keys:
            raise ResultsError(
                f"--where {spec!r}: {key!r} is not a swept parameter of this sweep; "
                f"use one of: {', '.join(keys)}"
            )
        try:
            values = parse_sweep_values(text, keep_interpolations=True)
        except ValueError:
            # a value that opens a quote it does not close; else one taken as it reads (it's)
            if text[:1] in ("'", '"') and text.count(text[0]) % 2:
                raise ResultsError(
                    f"--where {spec!r}: a quote in {text!r} is not closed; close it "
                    f"(--where \"{key}='...'\") or drop it"
                ) from None
            values = [text]
        # a misspelt state would show an empty table, as if no cell had it
        if key == STATE_KEY and (unknown := [v for v in values if v not in VIEW_STATES]):
            raise ResultsError(
                f"--where {spec!r}: {cell_text(unknown[0])!r} is not a cell state; use one "
                f"of: {', '.join(VIEW_STATES)}"
            )
        out.append((key, values, text))
    return out


def _matches(cell: CellView, key: str, values: list[Any], text: str) -> bool:
    actual = cell.state if key == STATE_KEY else cell.combo.get(key)
    shown = cell_text(actual)  # a value equal as shown matches, but True is not 1
    return shown == text or any(
        (isinstance(actual, bool) == isinstance(v, bool) and actual == v) or shown == cell_text(v)
        for v in values
    )


def _metric(cell: CellView, name: str) -> float:
    value = cell.metrics.get(name, math.nan)
    return value if math.isfinite(value) else math.nan


def _resolve(
    option: str, spec: MetricSpec, rows: list[_Row], state: _State
) -> tuple[str, list[_Row]]:
    """The column ``spec`` ranks by: a scalar metric, else a value of each cell's series,
    added to its metrics under ``NAME@REDUCTION``."""
    if spec.reduction is None and spec.name in state.metrics:
        return spec.name, rows
    jobs = [state.sweeps[i].root / c.dir if c.dir else None for i, c in rows]
    try:
        values, seen = state.reader.values(jobs, spec)
    except SeriesFileError as exc:  # a corrupt series file: its reader names it
        raise ResultsError(" ".join(exc.detail.split())) from None
    if all(v is None for v in values):
        found = ", ".join(seen) or "none"
        if spec.reduction is not None:
            raise ResultsError(
                f"{option} '{spec.name}@{spec.reduction}': no cell has a MetricsCallback "
                f"series {spec.name!r}; the series are: {found}"
            )
        have = ", ".join(state.metrics) or "none (no cell has completed with metrics)"
        raise ResultsError(
            f"{option} {spec.name!r}: no cell has a scalar metric {spec.name!r}; the metrics "
            f"are: {have}; nor a MetricsCallback series of that name; the series are: {found}"
        )
    column = spec.column
    out = [
        (i, cell if value is None else attrs.evolve(cell, metrics={**cell.metrics, column: value}))
        for (i, cell), value in zip(rows, values, strict=True)
    ]
    if column not in state.metrics:
        state.metrics.append(column)
    return column, out


@attrs.define
class _State:
    sweeps: Sequence[SweepView]
    metrics: list[str]
    reader: SeriesReader = attrs.Factory(SeriesReader)


def _parse(option: str, text: str, goals: Sequence[str]) -> MetricSpec:
    try:
        return parse_metric(text, goals)
    except MetricNameError as exc:
        raise ResultsError(f"{option} {exc}") from None


def _sort(text: str, rows: list[_Row], keys: Sequence[str], state: _State) -> list[_Row]:
    spec = _parse("--sort", text, ("asc", "desc"))
    descending = spec.goal == "desc"
    if spec.reduction is None and spec.name in keys:
        if spec.name == STATE_KEY:
            order: list[Any] = [r[1].state for r in rows]
        elif spec.name == SWEEP_KEY and len(state.sweeps) > 1:
            order = [r[0] for r in rows]
        else:
            order = [cell_text(r[1].combo.get(spec.name)) for r in rows]
        at = sorted(range(len(rows)), key=order.__getitem__, reverse=descending)
        return [rows[i] for i in at]
    name, rows = _resolve("--sort", spec, rows, state)
    present = [r for r in rows if not math.isnan(_metric(r[1], name))]
    absent = [r for r in rows if math.isnan(_metric(r[1], name))]
    return sorted(present, key=lambda r: _metric(r[1], name), reverse=descending) + absent


def results_table(
    sweep: SweepView,
    *,
    where: Sequence[str] = (),
    sort: str | None = None,
    best: str | None = None,
    config_keys: str = "changed",
) -> ResultsTable:
    """Select, order and mark a sweep's cells; :class:`ResultsError` when an option names
    no parameter or metric of the sweep.

    ``where``: ``KEY=VALUE`` filters a cell must all match (``KEY`` a swept parameter or
    ``state``; ``lr=0.1,1.0``: either). ``sort``: a metric (``val_loss:desc``: highest
    first; cells without it last), a swept parameter or ``state``; default: grid order.
    ``best``: the cell with the lowest value (``acc:max``: highest). A metric no cell
    returned, or ``NAME@last|min|max``, is read from the cells' series (:mod:`.series`).
    ``config_keys``: the config keys that are columns besides the swept ones: those that
    differ between the sweeps (``"changed"``), or ``"all"``.
    """
    return sweeps_table((sweep,), (), where=where, sort=sort, best=best, config_keys=config_keys)


def sweeps_table(
    sweeps: Sequence[SweepView],
    names: Sequence[str],
    *,
    where: Sequence[str] = (),
    sort: str | None = None,
    best: str | None = None,
    config_keys: str = "changed",
) -> ResultsTable:
    """One table across several sweeps, each row named by its sweep (``names``); ``sweep``
    is a key of ``where`` and ``sort`` too (see :func:`results_table`).

    A cell that won by a value neither sweep sweeps (``max_epochs=800`` against 40) must
    not look like it won by its swept values: every config key that differs between the
    sweeps is a column, filled where unswept; a cell's own (resumed) limits count over its
    sweep's, within one sweep too."""
    sweeps, names = tuple(sweeps), tuple(names)
    # a cell of an earlier grid (a resume that changed the swept keys) keeps its values
    swept = [
        *(p for s in sweeps for p in s.params),
        *(k for s in sweeps for c in s.cells for k in c.combo),
    ]
    params = tuple(dict.fromkeys(swept))
    limits = {  # none recorded: not known, not absent
        (i, json.dumps(c.limits, sort_keys=True, default=str)): c.limits
        for i, s in enumerate(sweeps)
        for c in s.cells
        if c.limits
    }
    across = len(names) > 1 or config_keys == "all" or len(limits) > 1
    configs = [sweep_config(s) for s in sweeps] if across else [{} for _ in sweeps]
    known = [c for c in configs if c] + [{**configs[i], **v} for (i, _), v in limits.items()]
    if config_keys == "all":
        params += tuple(sorted({k for c in known for k in c} - set(params)))
    else:
        params += changed_keys(known, params)
    keys = [*params, STATE_KEY, *([SWEEP_KEY] if names else [])]
    state = _State(sweeps, sorted({m for s in sweeps for c in s.cells for m in c.metrics}))
    rows: list[_Row] = [
        (i, _filled(c, {**configs[i], **c.limits}, params) if across else c)
        for i, s in enumerate(sweeps)
        for c in s.cells
    ]
    for key, values, text in _where(where, keys):
        if key == SWEEP_KEY and names:
            rows = [r for r in rows if names[r[0]] in {cell_text(v) for v in values} | {text}]
        else:
            rows = [r for r in rows if _matches(r[1], key, values, text)]
    if sort:
        rows = _sort(sort, rows, keys, state)
    best_cell, best_name, best_max, unranked = None, None, False, 0
    if best:
        spec = _parse("--best", best, ("min", "max"))
        best_max = spec.goal == "max" or (spec.goal is None and spec.reduction == "max")
        best_name, rows = _resolve("--best", spec, rows, state)
        ranked = [c for _, c in rows if not math.isnan(_metric(c, best_name))]
        unranked = sum(1 for _, c in rows if best_name in c.metrics) - len(ranked)
        if ranked:
            pick = max if best_max else min
            best_cell = pick(ranked, key=lambda c: _metric(c, best_name))
    return ResultsTable(
        sweep=sweeps[0],
        params=params,
        metrics=tuple(state.metrics),
        cells=tuple(c for _, c in rows),
        best=best_cell,
        best_metric=best_name,
        best_max=best_max,
        sweeps=sweeps if names else (),
        names=names,
        origins=tuple(i for i, _ in rows) if names else (),
        unranked=unranked,
        configs=tuple(configs),
    )


#: how many of a sweep's cells :func:`sweep_config` looks in for a provenance record
_CONFIG_CELLS = 20


def sweep_config(sweep: SweepView) -> dict[str, Any]:
    """The config ``sweep``'s cells ran, as ``{dotted key: value}``, from the first readable
    record of its first :data:`_CONFIG_CELLS` cells (``{}``: none): a sweep's cells share
    every value but the swept ones.

    >>> import tempfile
    >>> from mushin_box._core.sidecars import write_json_atomic
    >>> root = Path(tempfile.mkdtemp())
    >>> write_json_atomic(root / "x=1" / "mushin_provenance.json", {"reproducibility":
    ...     {"config": {"x": 1, "trainer": {"max_epochs": 40}}}, "run": {}})
    >>> sweep = SweepView(root, ("x",), (CellView("x=1", {"x": 1}, "completed", "completed"),))
    >>> sweep_config(sweep)
    {'trainer.max_epochs': 40, 'x': 1}
    """
    base = os.fspath(sweep.root)
    for cell in [c for c in sweep.cells if c.dir][:_CONFIG_CELLS]:
        record = read_json(os.path.join(base, str(cell.dir), PROVENANCE_FILE))
        try:
            full = split_provenance(dict(record)) if isinstance(record, dict) else {}
        except Exception:  # a record of an unknown shape: the next cell's
            continue
        flat: dict[str, Any] = {}
        for part in ("reproducibility", "run"):
            config = full.get(part, {}).get("config") if isinstance(full.get(part), dict) else None
            if isinstance(config, Mapping):
                _flatten(config, "", flat)
        if flat:
            return flat
    return {}


def _flatten(node: Mapping[Any, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            _flatten(value, f"{prefix}{key}.", out)
        else:
            out[f"{prefix}{key}"] = value


def changed_keys(
    configs: Sequence[Mapping[str, Any]], params: Sequence[str] = ()
) -> tuple[str, ...]:
    """The keys, sorted, whose value differs between two of ``configs`` (a key one lacks
    differs too), but ``params``.

    >>> changed_keys([{"lr": 0.1, "epochs": 40, "depth": 2}, {"lr": 0.2, "epochs": 800,
    ...               "depth": 2}], params=["lr"])
    ('epochs',)
    """
    keys = sorted({k for config in configs for k in config} - set(params))
    texts = [{k: json.dumps(v, sort_keys=True, default=str) for k, v in c.items()} for c in configs]
    return tuple(k for k in keys if len({t.get(k) for t in texts}) > 1)


def _filled(cell: CellView, config: Mapping[str, Any], params: Sequence[str]) -> CellView:
    """``cell`` with its sweep's config value for each of ``params`` it does not sweep."""
    given = {p: config[p] for p in params if p not in cell.combo and p in config}
    return attrs.evolve(cell, combo={**cell.combo, **given}) if given else cell


def table_records(table: ResultsTable) -> list[dict[str, Any]]:
    """One flat record per row: what ``--csv``, ``--md`` and ``--json`` print."""
    records = []
    for at, cell in enumerate(table.cells):
        record: dict[str, Any] = {"sweep": table.sweep_name(at)} if table.names else {}
        record.update(dir=cell.dir, label=cell_label(cell))
        record.update({p: cell.combo.get(p) for p in table.params})
        record["state"] = cell.state
        record["restarts"] = cell.restarts  # torchrun's or SLURM's, in its last launch
        record.update({m: cell.metrics.get(m) for m in table.metrics})
        error = f"{cell.error_type or 'Error'}: {cell.error_message or ''}"
        record["error"] = " ".join(error.split()) if cell.error_type or cell.error_message else None
        record["best"] = table.is_best(cell)
        records.append(record)
    return records


def summary(table: ResultsTable) -> Mapping[str, Any]:
    """What ``--json`` prints besides the rows."""
    best = table.best
    head: dict[str, Any] = {"sweep": str(table.sweep.root)}
    if table.names:
        head = {
            "sweeps": [
                {"name": name, "sweep": str(s.root), "counts": s.counts()}
                for name, s in zip(table.names, table.sweeps, strict=True)
            ]
        }
    best_record = None
    if table.best_metric is not None:
        best_record = {
            "metric": table.best_metric,
            "goal": "max" if table.best_max else "min",
            "dir": best.dir if best else None,
            "value": best.metrics.get(table.best_metric) if best else None,
        }
        if table.names:
            at = next((i for i, c in enumerate(table.cells) if c is best), None)
            best_record["sweep"] = None if at is None else table.sweep_name(at)
    return {
        **head,
        "params": list(table.params),
        "metrics": list(table.metrics),
        **({} if table.names else {"counts": table.sweep.counts()}),
        "best": best_record,
    }


@gc_paused()  # a bulk read: see _core/gcpause.py
def read_finished(
    root: str | os.PathLike[str], heading: Callable[[Heading], None] | None = None
) -> SweepView | None:
    """A finished sweep's view as ``read_sweep`` shows it, from its manifest (each entry a
    cell's status record); None when the manifest cannot answer. ``heading``: called before
    any metrics file is read (a first line printed at once)."""
    found = finished_entries(root)
    if found is None:
        return None
    manifest, entries = found
    view, head = bare_view(Path(root), manifest, entries)
    if heading is not None:
        heading(head)
    return attrs.evolve(view, cells=tuple(cell_view(view.root, e, e) for e in entries))


def read_results(
    root: str | os.PathLike[str], heading: Callable[[Heading], None] | None = None
) -> SweepView:
    """The sweep as ``show`` and ``report`` read it: :func:`read_finished`, else ``read_sweep``."""
    path = Path(root)
    if path.is_dir():
        try:
            view = read_finished(path, heading)
        except UnsafeFileError:  # a refused file: read_sweep would refuse it again
            raise
        except OSError:  # gone or unreadable mid-read: read_sweep says what
            view = None
        if view is not None:
            return view
    return read_sweep(path)

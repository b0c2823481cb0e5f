# SPDX-License-Identifier: MIT
"""``load_experiment``: a sweep directory, or one job directory, as an xarray Dataset.

A ``Workflow.run`` sweep is read from its cells' sidecars, its series placed on the grid
as numpy arrays in one pass (an xarray object per cell, aligned a thousand times, costs
more than reading the files). A plain Hydra ``--multirun`` sweep (any launcher): the grid
is ``multirun.yaml``'s sweep overrides, each job placed by its ``.hydra/overrides.yaml``;
values only the jobs show (a sampled interval) and keys that differ between jobs are read
from the jobs. Hydra records no status: a job that failed mid-fit keeps its epochs.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from omegaconf import OmegaConf

from mushin_box._core import layout
from mushin_box._core.gcpause import gc_paused
from mushin_box._core.overrideparse import parse_overrides
from mushin_box._core.overrides import parse_override_value, parse_sweep_values
from mushin_box._core.safeio import UnsafeFileError, open_regular_stat
from mushin_box._core.sidecars import canonical_dumps
from mushin_box._core.targets import public
from mushin_box._results.series import STAGE_DIMS, stage_data
from mushin_box._sweepdir import manifest
from mushin_box._sweepdir.board import read_metrics
from mushin_box._sweepdir.settled import finished_entries


@gc_paused()  # a bulk read: see _core/gcpause.py
def load_sweep(
    path: str | os.PathLike[str],
    records: Sequence[tuple[Path, dict[str, Any]]] | None = None,
    metrics: Mapping[Path, dict[str, Any]] | None = None,
) -> xr.Dataset:
    """A sweep directory as a Dataset. ``records``: its cells' status records, when read
    already; ``metrics``: the metrics of cells whose metrics and whole provenance record
    the caller read (the resume shortcut), not read or checked again."""
    root = Path(path)
    head: dict[str, Any] | None = None
    cells: Sequence[tuple[str | Path, dict[str, Any]]] | None = records
    if records is None:  # a finished sweep: its manifest, not 10,000 status files
        finished = finished_entries(root)
        if finished is not None:
            head = finished[0]
            base = os.fspath(root)  # os.path, not pathlib: 10,000 cells
            cells = [(os.path.join(base, e["dir"]), e) for e in finished[1] if e.get("dir")]
    if cells is None:
        cells = records = list(manifest.cell_records(root))
    head = head or manifest.read_sweep_manifest(root) or manifest.manifest_from_cells(root, records)
    grid: dict[str, list[Any]] = head["grid"]
    params = list(grid)
    shape = tuple(len(v) for v in grid.values())
    keys = manifest.grid_keys(grid)
    index: dict[Any, tuple[int, ...]] = dict(zip(keys, np.ndindex(*shape), strict=True))
    coords = {p: grid_coords(v) for p, v in grid.items()}
    found: dict[str, dict[tuple[int, ...], Any]] = {}  # metric -> grid point -> value
    series: dict[str, list[tuple[tuple[int, ...], Series]]] = {}
    failures: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    status = np.full(shape, "pending", dtype=object)
    cell_dirs = np.full(shape, "", dtype=object)
    for cell_dir, record in cells:
        where = index.get(manifest.grid_key(record["combo"], params))
        if where is None:
            continue  # a cell of an earlier, different grid
        state = str(record.get("status"))
        status[where] = state
        cell_dirs[where] = name = os.path.basename(cell_dir)
        if state == "failed":
            failures.append({"combo": record["combo"], "error": record.get("error")})
        elif state in ("skipped", "timeout"):
            skipped.append(
                {"combo": record["combo"], "status": state, "reason": record.get("reason")}
            )
        if state != "completed":
            continue
        values = metrics.get(cell_dir) if metrics and isinstance(cell_dir, Path) else None
        if values is None:
            _warn_if_truncated(os.path.join(cell_dir, layout.PROVENANCE_FILE), name)
            values = read_metrics(cell_dir) or {}  # not an object: warned, None
        for name, value in values.items():
            if isinstance(value, bool | int | float | str):
                found.setdefault(name, {})[where] = value
        for name, one in job_series(cell_dir).items():
            series.setdefault(name, []).append((where, one))
    # a metric named like a swept parameter ("x") or a series' dimension ("epoch") would
    # clash with its coordinate
    reserved = {*grid, *STAGE_DIMS.values()}
    variables: dict[str, xr.DataArray] = {}
    for name, values in found.items():
        arr = metric_array(values, shape)
        variables[f"metrics.{name}" if name in reserved else name] = var = xr.DataArray(
            arr, dims=params, coords=coords
        )
        if arr.dtype == object:  # written back: None stays None under any pandas
            var.data[...] = arr
    variables.update(gridded_series(series, shape, params, coords))
    ds = xr.Dataset(variables, coords=coords)
    ds["status"] = xr.DataArray(status, dims=params, coords=coords)
    ds["cell_dir"] = xr.DataArray(cell_dirs, dims=params, coords=coords)
    ds.attrs.update(
        working_dir=str(root.resolve()),
        params=list(params),
        failures=_json_text(failures),
        skipped=_json_text(skipped),
    )
    return ds


def metric_array(values: Mapping[tuple[int, ...], Any], shape: tuple[int, ...]) -> Any:
    """One scalar metric over the grid, in the type the cells returned it as.

    Integers stay integers when every grid point has one (a missing point would need NaN,
    which only a float holds: then they are floats); strings are a string variable, ``None``
    where a cell has none; numbers are floats with NaN where missing (booleans as 0/1).

    >>> metric_array({(0,): 3, (1,): 4}, (2,)).dtype.kind, metric_array({(0,): 3}, (2,))
    ('i', array([ 3., nan]))
    >>> metric_array({(1,): "adam"}, (2,)).tolist()
    [None, 'adam']
    """
    plain = list(values.values())
    whole = len(plain) == int(np.prod(shape))  # a value at every grid point
    if whole and all(isinstance(v, int) and not isinstance(v, bool) for v in plain):
        out = np.zeros(shape, dtype=np.int64)
    elif all(isinstance(v, bool | int | float) for v in plain):
        out = np.full(shape, np.nan)
        values = {k: float(v) for k, v in values.items()}
    else:  # text (a label, an optimizer's name), or text and numbers in different cells
        out = np.full(shape, None, dtype=object)
    for where, value in values.items():
        out[where] = value
    return out


def _warn_if_truncated(path: str, cell: str) -> None:
    """Warn when a completed cell's provenance record is not a whole JSON object; only its
    ends are read (a record can be megabytes; truncation is how a record breaks)."""
    try:
        fd, st = open_regular_stat(path)  # no symlink, FIFO or device: refused
    except FileNotFoundError:
        return
    except UnsafeFileError as exc:
        warnings.warn(f"cell {cell}: its {layout.PROVENANCE_FILE} is refused ({exc})", stacklevel=3)
        return
    try:
        head, tail = os.pread(fd, 1, 0), os.pread(fd, 2, max(st.st_size - 2, 0))
    finally:
        os.close(fd)
    if head != b"{" or tail.rstrip(b"\n")[-1:] != b"}":
        warnings.warn(
            f"cell {cell}: its {layout.PROVENANCE_FILE} is unreadable (not a whole JSON object); "
            "diff cannot compare it, and resume=True runs the cell again to rebuild it",
            stacklevel=3,
        )


@public
def load_experiment(path: str | os.PathLike[str]) -> xr.Dataset:
    """Load a sweep directory, or one job directory, as an :class:`xarray.Dataset`.

    **Sweep** (a ``Workflow.run`` working dir): one dimension per swept parameter (its
    grid values as coordinates, a swept ``None`` as ``None``), one variable per scalar
    metric the task returned and per ``MetricsCallback`` series (with its
    ``epoch``/``*_round`` dimension appended), NaN for failed, skipped or missing cells
    (``None`` in a text metric, under any pandas; a metric named like a swept parameter or
    a series' dimension is called ``metrics.<name>``); ``status`` and ``cell_dir``
    variables; ``attrs["failures"]``/``attrs["skipped"]`` list those cells (JSON text, so
    they survive netCDF). Works on a half-finished sweep.

    **Plain Hydra sweep** (``--multirun`` or ``hydra_zen.launch(..., multirun=True)``
    without ``Workflow.run``: job dirs ``0/``, ``1/``... with ``.hydra/``): one dimension
    per swept override (from ``multirun.yaml`` and each job's ``.hydra/overrides.yaml``;
    a config group's coordinates are its option names), the jobs' ``MetricsCallback``
    series, and ``cell_dir`` (the job's directory; ``""`` for a job not started).
    Hydra records no status, so there is none; ``attrs["source"]`` is
    ``"hydra --multirun"``.

    **One job**: each ``MetricsCallback`` series becomes a variable named
    ``"<stage>.<metric>"``: ``fit.*`` along ``epoch``, ``test.*`` along ``test_round``,
    ``validate.*`` along ``validate_round``; its Hydra config in ``attrs["config"]`` (a
    mapping, interpolations kept as text) and ``attrs["config_yaml"]`` (the YAML text; drop
    ``attrs["config"]`` before ``to_netcdf``, which stores no mappings).

    Only sidecar files are read; nothing is imported from the experiment. The series come
    from the ``*_metrics.json`` files, without importing torch; a job written before those
    existed is read from its ``*_metrics.pt`` files, through torch.

    Parameters
    ----------
    path : str | os.PathLike
        A sweep directory or a job directory.

    Returns
    -------
    xarray.Dataset

    Examples
    --------
    >>> from mushin_box import load_experiment
    >>> ds = load_experiment("outputs/2026-11-29/12-00-00")  # doctest: +SKIP
    >>> ds["fit.val_loss"].sel(epoch=2)  # doctest: +SKIP
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"load_experiment: {root} is not a directory")
    if manifest.is_sweep_dir(root):
        return load_sweep(root)
    if (root / layout.HYDRA_MULTIRUN_FILE).is_file() or any(root.glob(f"*/{_OVERRIDES}")):
        return load_hydra_sweep(root)
    metrics = ", ".join(_METRICS_FILES)
    if not any((root / name).is_file() for name in (*_METRICS_FILES, *_JSON_FILES)):
        if not (root / layout.HYDRA_OUTPUT_SUBDIR / layout.HYDRA_CONFIG_FILE).is_file():
            raise FileNotFoundError(
                f"load_experiment: {root} holds no results: no {layout.MANIFEST_FILE} or "
                f"*/{layout.STATUS_FILE} (a Workflow.run sweep), no "
                f"{layout.HYDRA_MULTIRUN_FILE} or */{_OVERRIDES} (a --multirun sweep), no "
                f"{metrics} (a job); pass a sweep's or a job's directory"
            )
        warnings.warn(
            f"load_experiment: the job {root} holds no MetricsCallback file "
            f"({metrics}): the Dataset holds its config only",
            stacklevel=2,
        )
    return load_job(root)


#: one metric's series: (index dimension, index values, values along the index [+ extra])
Series = tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]


def _index(values: list[Any], index_key: str, stage: str) -> np.ndarray[Any, Any]:
    """A series' index; by position when it holds no whole numbers (a metric logged as
    ``epoch`` replaced it, before the name was reserved)."""
    if values and {type(v) for v in values} == {int}:  # the common case, at once
        return np.asarray(values, dtype=np.int64)
    raw = np.asarray(values, dtype=np.float64)
    if raw.size and (not np.isfinite(raw).all() or (raw != np.round(raw)).any()):
        warnings.warn(
            f"{layout.stage_metrics_file(stage)}: its {index_key!r} values are not an index "
            f"(a metric logged as {index_key!r} replaced it, before MetricsCallback reserved "
            f"the name); using positions 0..{raw.size - 1}",
            stacklevel=4,
        )
        return np.arange(raw.size, dtype=np.int64)
    return raw.astype(np.int64)


def job_series(job: str | os.PathLike[str]) -> dict[str, Series]:
    """Every ``MetricsCallback`` series of a job, named ``"<stage>.<metric>"``."""
    out: dict[str, Series] = {}
    for stage, data in stage_data(job):
        key = "epoch" if stage == "fit" else "round"
        index = _index(list(data.get(key, [])), key, stage)
        for name, values in data.items():
            if name != key:
                out[f"{stage}.{name}"] = (STAGE_DIMS[stage], index, np.asarray(values, float))
    return out


def load_job(path: str | os.PathLike[str]) -> xr.Dataset:
    """One job directory as a Dataset, its Hydra config in its attrs (interpolations kept)."""
    job = Path(path)
    variables = {}
    for name, (dim, index, values) in job_series(job).items():
        dims = [dim] + [f"{name}_dim{i}" for i in range(1, values.ndim)]
        variables[name] = xr.DataArray(values, dims=dims, coords={dim: index})
    attrs: dict[str, Any] = {"job_dir": str(job.resolve())}
    file = job / layout.HYDRA_OUTPUT_SUBDIR / layout.HYDRA_CONFIG_FILE
    if file.is_file():
        text = file.read_text(encoding="utf-8")
        mapping = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
        attrs["config"] = dict(mapping) if isinstance(mapping, dict) else {}
        attrs["config_yaml"] = text
    return xr.Dataset(variables, attrs=attrs)


def _json_text(value: Any) -> str:
    return canonical_dumps(value).decode("utf-8").rstrip("\n")


def grid_coords(values: list[Any]) -> np.ndarray[Any, Any] | pd.Index:
    """A grid axis as a coordinate: numbers as numbers, anything else as objects, ``None``
    kept. The latter is an index of dtype object, because xarray passes an array of objects
    through pandas, whose string dtype (its default for text from pandas 3) reads ``None``
    as NaN."""
    # coordinates must be hashable scalars: lists/dicts become their JSON text
    plain = [_json_text(v) if isinstance(v, list | dict) else v for v in values]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in plain):
        return np.asarray(plain)
    return pd.Index(plain, dtype=object)


def gridded_series(
    series: dict[str, list[tuple[tuple[int, ...], Series]]],
    shape: tuple[int, ...],
    dims: list[str],
    coords: dict[str, Any],
) -> dict[str, xr.DataArray]:
    """Each cell's series (``(grid index, series)`` pairs) on the grid: the series' own
    dimensions appended, their indices joined (sorted union), NaN where a cell lacks a
    point; a metric's extra dimensions (a logged vector) padded to the longest."""
    out: dict[str, xr.DataArray] = {}
    for name, parts in series.items():
        index_dim = parts[0][1][0]
        index = np.unique(np.concatenate([s[1] for _, s in parts]))
        ndim = max(s[2].ndim for _, s in parts)
        extra = tuple(
            max((s[2].shape[d] if s[2].ndim > d else 1) for _, s in parts) for d in range(1, ndim)
        )
        arr = np.full(shape + (index.size,) + extra, np.nan)
        for where, (_, idx, values) in parts:
            if values.ndim < ndim:  # a scalar series where others log vectors
                values = values.reshape(values.shape + (1,) * (ndim - values.ndim))
            target = arr[where]
            sel = (np.searchsorted(index, idx),) + tuple(slice(0, n) for n in values.shape[1:])
            target[sel] = values
        extra_dims = [f"{name}_dim{i}" for i in range(1, ndim)]
        out[name] = xr.DataArray(
            arr, dims=[*dims, index_dim, *extra_dims], coords={**coords, index_dim: index}
        )
    return out


_OVERRIDES = f"{layout.HYDRA_OUTPUT_SUBDIR}/{layout.HYDRA_OVERRIDES_FILE}"
_METRICS_FILES = tuple(layout.stage_metrics_file(stage) for stage in STAGE_DIMS)
_JSON_FILES = tuple(layout.stage_metrics_json_file(stage) for stage in STAGE_DIMS)


def _yaml(path: Path) -> Any:
    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as exc:  # a torn or hand-edited file
        raise ValueError(
            f"load_experiment: cannot read {path} ({type(exc).__name__}: {exc}); restore it "
            "from the job's config, or move the job directory out of the sweep"
        ) from None


def _overrides(texts: Any, where: Path) -> list[tuple[str, Any, str]]:
    """(dimension name, parsed override, value text) per override of a Hydra file."""
    from hydra.errors import HydraException

    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"load_experiment: {where} is not a list of overrides")
    out = []
    for text in texts:
        try:
            (parsed,) = parse_overrides([text])
        except HydraException as exc:
            raise ValueError(f"load_experiment: {where}: {exc}") from None
        if parsed.is_delete() or "=" not in text:
            continue  # '~key' removes a key: no value, no dimension
        name = parsed.key_or_group + (f"@{parsed.package}" if parsed.package else "")
        out.append((name, parsed, text.split("=", 1)[1]))
    return out


def _declared(root: Path) -> dict[str, list[Any] | None]:
    """The sweep's swept keys, from ``multirun.yaml``: their values, or None where the
    sweep is no list (an ``interval`` a sweeper samples from)."""
    file = root / layout.HYDRA_MULTIRUN_FILE
    if not file.is_file():
        return {}
    task = _yaml(file)
    for key in ("hydra", "overrides", "task"):  # hydra.overrides.task
        task = task.get(key) if isinstance(task, dict) else None
    out: dict[str, list[Any] | None] = {}
    for name, parsed, text in _overrides(task or [], file):
        if parsed.is_sweep_override():
            try:
                out[name] = parse_sweep_values(text, keep_interpolations=True)
            except ValueError:
                out[name] = None
    return out


def _jobs(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(job dir, {override name: value}) per job directory, in job order; a directory that
    holds job files but no ``.hydra/overrides.yaml`` is an error naming it."""
    jobs: list[tuple[Path, dict[str, Any]]] = []
    unplaced: list[str] = []
    subdirs = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    for job in sorted(subdirs, key=lambda p: (0, int(p.name)) if p.name.isdigit() else (1, p.name)):
        file = job / _OVERRIDES
        if file.is_file():
            values = {
                name: parse_override_value(text, keep_interpolations=True)
                for name, _, text in _overrides(_yaml(file), file)
            }
            jobs.append((job, values))
        elif (job / layout.HYDRA_OUTPUT_SUBDIR).is_dir() or any(
            (job / name).is_file() for name in (*_METRICS_FILES, *_JSON_FILES)
        ):
            unplaced.append(job.name)
    if unplaced:
        raise FileNotFoundError(
            f"load_experiment: job dir(s) {', '.join(unplaced)} of the sweep {root} have no "
            f"{_OVERRIDES}, so their swept values are unknown (Hydra writes it as a job "
            "starts, unless hydra.output_subdir=null); move them out of the sweep, or load "
            "each with load_experiment(<job dir>)"
        )
    return jobs


def _grid(
    declared: dict[str, list[Any] | None], jobs: list[tuple[Path, dict[str, Any]]]
) -> dict[str, list[Any]]:
    """The swept keys and their values: the declared sweeps, then any key that varies (an
    absent key, ``""``, is a value)."""
    names = dict.fromkeys(n for _, values in jobs for n in values if n not in declared)
    params = [*declared] + [
        n for n in names if len({_json_text(v[n]) if n in v else "" for _, v in jobs}) > 1
    ]
    grid: dict[str, list[Any]] = {}
    for name in params:
        axis = declared.get(name)
        if axis is None:  # values only the jobs show, each once
            found = [values[name] for _, values in jobs if name in values]
            axis = list({_json_text(v): v for v in found}.values())
        grid[name] = list(axis)
    return grid


def _place(
    root: Path, grid: dict[str, list[Any]], jobs: list[tuple[Path, dict[str, Any]]]
) -> dict[tuple[int, ...], Path]:
    """Each job's grid index; a job off the grid (of an earlier sweep into the same
    directory) is left out, and of two jobs on one point the later wins, with warnings."""
    axes = {name: {_json_text(v): i for i, v in enumerate(values)} for name, values in grid.items()}
    placed: dict[tuple[int, ...], Path] = {}
    off: list[str] = []
    for job, values in jobs:
        try:
            where = tuple(axes[name][_json_text(values[name])] for name in grid)
        except KeyError:
            off.append(job.name)
            continue
        if where in placed:
            warnings.warn(
                f"load_experiment: jobs {placed[where].name} and {job.name} of {root} ran the "
                f"same values; reading {job.name}",
                stacklevel=4,
            )
        placed[where] = job
    if off:
        warnings.warn(
            f"load_experiment: job dir(s) {', '.join(off)} of {root} are not on the grid of "
            f"its {layout.HYDRA_MULTIRUN_FILE} ({grid}): an earlier sweep into the same directory; "
            "left out",
            stacklevel=4,
        )
    return placed


def load_hydra_sweep(root: Path) -> xr.Dataset:
    """A plain Hydra ``--multirun`` sweep directory as a Dataset (see module doc)."""
    jobs = _jobs(root)
    grid = _grid(_declared(root), jobs)
    if not grid and len(jobs) > 1:
        raise ValueError(
            f"load_experiment: the {len(jobs)} jobs of {root} ran with the same overrides and "
            f"its {layout.HYDRA_MULTIRUN_FILE} declares no sweep; load each with "
            "load_experiment(<job dir>)"
        )
    params = list(grid)
    shape = tuple(len(v) for v in grid.values())
    coords = {name: grid_coords(values) for name, values in grid.items()}
    cell_dirs = np.full(shape, "", dtype=object)
    series: dict[str, list[tuple[tuple[int, ...], Series]]] = {}
    for where, job in _place(root, grid, jobs).items():
        cell_dirs[where] = job.name
        for name, one in job_series(job).items():
            series.setdefault(name, []).append((where, one))
    if not jobs:
        warnings.warn(
            f"load_experiment: no job of the sweep {root} has started yet (no */{_OVERRIDES})",
            stacklevel=3,
        )
    elif not series:
        warnings.warn(
            f"load_experiment: no job of the sweep {root} holds a MetricsCallback file "
            f"({', '.join(_METRICS_FILES)}): the Dataset holds the grid only (train with "
            "mushin_box.MetricsCallback to record the series)",
            stacklevel=3,
        )
    ds = xr.Dataset(gridded_series(series, shape, params, coords), coords=coords)
    ds["cell_dir"] = xr.DataArray(cell_dirs, dims=params, coords=coords)
    ds.attrs.update(working_dir=str(root.resolve()), params=params, source="hydra --multirun")
    return ds

# SPDX-License-Identifier: MIT
"""``load_experiment``: a sweep directory, or one job directory, as an xarray Dataset.

A ``Workflow.run`` sweep is read from its cells' sidecars here; a plain Hydra ``--multirun``
sweep from Hydra's own files (:mod:`mushin_box._results.raw_sweep`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mushin_box._core.gcpause import gc_paused
from mushin_box._core.layout import (
    HYDRA_CONFIG_FILE,
    HYDRA_MULTIRUN_FILE,
    HYDRA_OUTPUT_SUBDIR,
    HYDRA_OVERRIDES_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    PROVENANCE_FILE,
    STATUS_FILE,
    stage_metrics_file,
    stage_metrics_json_file,
)
from mushin_box._core.targets import public
from mushin_box._results.series import (
    STAGES,
    Series,
    grid_coords,
    gridded_series,
    job_series,
    load_job,
)

__all__ = [
    "load_experiment",
    "load_sweep",
    "metric_array",
]


@gc_paused()  # a bulk read: see _core/gcpause.py
def load_sweep(
    path: str | os.PathLike[str],
    records: Sequence[tuple[Path, dict[str, Any]]] | None = None,
    metrics: Mapping[Path, dict[str, Any]] | None = None,
) -> xr.Dataset:
    """A sweep directory as a Dataset (see :func:`load_experiment`); ``records``: its cells'
    status records, when the caller has read them already; ``metrics``: the metrics of
    cells whose metrics sidecar and whole provenance record the caller read (the resume
    shortcut), not read or checked again."""
    from mushin_box._core.sidecars import canonical_dumps
    from mushin_box._sweepdir.gridorder import grid_key, grid_keys
    from mushin_box._sweepdir.manifest import (
        cell_records,
        manifest_from_cells,
        read_sweep_manifest,
    )
    from mushin_box._sweepdir.settled import finished_entries, read_object

    root = Path(path)
    manifest: dict[str, Any] | None = None
    cells: Sequence[tuple[str | Path, dict[str, Any]]] | None = records
    if records is None:  # a finished sweep: its manifest, not 10,000 status files
        finished = finished_entries(root)
        if finished is not None:
            manifest = finished[0]
            base = os.fspath(root)  # os.path, not pathlib: 10,000 cells
            cells = [(os.path.join(base, e["dir"]), e) for e in finished[1] if e.get("dir")]
    if cells is None:
        cells = records = list(cell_records(root))
    manifest = manifest or read_sweep_manifest(root) or manifest_from_cells(root, records)
    grid: dict[str, list[Any]] = manifest["grid"]
    params = list(grid)
    shape = tuple(len(v) for v in grid.values())
    index: dict[Any, tuple[int, ...]] = dict(zip(grid_keys(grid), np.ndindex(*shape), strict=True))
    coords = {p: grid_coords(v) for p, v in grid.items()}
    found: dict[str, dict[tuple[int, ...], Any]] = {}  # metric -> grid point -> value
    series: dict[str, list[tuple[tuple[int, ...], Series]]] = {}
    failures: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    status = np.full(shape, "pending", dtype=object)
    cell_dirs = np.full(shape, "", dtype=object)
    for cell_dir, record in cells:
        where = index.get(grid_key(record["combo"], params))
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
            _warn_if_truncated(os.path.join(cell_dir, PROVENANCE_FILE), name)
            # not an object (a list, a number): refused by read_json, with a warning
            values = read_object(os.path.join(cell_dir, METRICS_FILE)) or {}
        for name, value in values.items():
            if isinstance(value, bool | int | float | str):
                found.setdefault(name, {})[where] = value
        for name, one in job_series(cell_dir).items():
            series.setdefault(name, []).append((where, one))
    scalars = {name: metric_array(values, shape) for name, values in found.items()}
    dims = params
    # a metric named like a swept parameter ("x") or a series' dimension ("epoch") would
    # clash with its coordinate
    reserved = {*grid, *STAGES.values()}
    variables: dict[str, xr.DataArray] = {
        (f"metrics.{name}" if name in reserved else name): _grid_variable(arr, dims, coords)
        for name, arr in scalars.items()
    }
    variables.update(gridded_series(series, shape, dims, coords))
    ds = xr.Dataset(variables, coords=coords)
    ds["status"] = xr.DataArray(status, dims=dims, coords=coords)
    ds["cell_dir"] = xr.DataArray(cell_dirs, dims=dims, coords=coords)
    ds.attrs.update(
        working_dir=str(root.resolve()),
        params=list(params),
        failures=canonical_dumps(failures).decode().rstrip("\n"),
        skipped=canonical_dumps(skipped).decode().rstrip("\n"),
    )
    return ds


def metric_array(values: Mapping[tuple[int, ...], Any], shape: tuple[int, ...]) -> Any:
    """One scalar metric over the grid, in the type the cells returned it as.

    Integers stay integers when every grid point has one (a missing point would need NaN,
    which only a float holds: then they are floats); strings are a string variable, ``None``
    where a cell has none; numbers are floats with NaN where missing (booleans as 0/1).

    Examples
    --------
    >>> metric_array({(0,): 3, (1,): 4}, (2,)).dtype.kind, metric_array({(0,): 3}, (2,))
    ('i', array([ 3., nan]))
    >>> metric_array({(1,): "adam"}, (2,)).tolist()
    [None, 'adam']
    """
    plain = list(values.values())
    if all(isinstance(v, int) and not isinstance(v, bool) for v in plain) and len(plain) == int(
        np.prod(shape)
    ):
        out = np.zeros(shape, dtype=np.int64)
    elif all(isinstance(v, bool | int | float) for v in plain):
        out = np.full(shape, np.nan)
        values = {k: float(v) for k, v in values.items()}
    else:  # text (a label, an optimizer's name), or text and numbers in different cells
        out = np.full(shape, None, dtype=object)
    for where, value in values.items():
        out[where] = value
    return out


def _grid_variable(arr: Any, dims: list[str], coords: Mapping[str, Any]) -> xr.DataArray:
    """One metric on the grid, its values as :func:`metric_array` made them.

    xarray passes an array of objects through pandas, whose string dtype (its default for
    text from pandas 3) reads ``None`` as NaN; the values are written back into the numpy
    array the DataArray holds, so ``None`` stays ``None`` under any pandas.
    """
    out = xr.DataArray(arr, dims=dims, coords=coords)
    if arr.dtype == object:
        out.data[...] = arr
    return out


def _warn_if_truncated(path: str, cell: str) -> None:
    """Warn when a completed cell's provenance record is not a whole JSON object.

    Only its ends are read (a record can be megabytes; truncation is how a record breaks):
    ``resume=True`` parses it in full and runs the cell again when it is unreadable.
    """
    from mushin_box._core.safeio import UnsafeFileError, open_regular_stat

    try:
        fd, st = open_regular_stat(path)  # no symlink, FIFO or device: refused
    except FileNotFoundError:
        return
    except UnsafeFileError as exc:
        warnings.warn(f"cell {cell}: its {PROVENANCE_FILE} is refused ({exc})", stacklevel=3)
        return
    try:
        size = st.st_size
        head, tail = os.pread(fd, 1, 0), os.pread(fd, 2, max(size - 2, 0))
    finally:
        os.close(fd)
    if head != b"{" or tail.rstrip(b"\n")[-1:] != b"}":
        warnings.warn(
            f"cell {cell}: its {PROVENANCE_FILE} is unreadable (not a whole JSON object); "
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
    from mushin_box._results.raw_sweep import is_hydra_sweep_dir, load_hydra_sweep
    from mushin_box._sweepdir.manifest import is_sweep_dir

    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"load_experiment: {root} is not a directory")
    if is_sweep_dir(root):
        return load_sweep(root)
    if is_hydra_sweep_dir(root):
        return load_hydra_sweep(root)
    metrics = [stage_metrics_file(stage) for stage in STAGES]
    twins = [stage_metrics_json_file(stage) for stage in STAGES]
    if not any((root / name).is_file() for name in (*metrics, *twins)):
        hydra = root / HYDRA_OUTPUT_SUBDIR / HYDRA_CONFIG_FILE
        if not hydra.is_file():
            raise FileNotFoundError(
                f"load_experiment: {root} holds no results: no {MANIFEST_FILE} or "
                f"*/{STATUS_FILE} (a Workflow.run sweep), no {HYDRA_MULTIRUN_FILE} or "
                f"*/{HYDRA_OUTPUT_SUBDIR}/{HYDRA_OVERRIDES_FILE} (a --multirun sweep), no "
                f"{', '.join(metrics)} (a job); pass a sweep's or a job's directory"
            )
        warnings.warn(
            f"load_experiment: the job {root} holds no MetricsCallback file "
            f"({', '.join(metrics)}): the Dataset holds its config only",
            UserWarning,
            stacklevel=2,
        )
    return load_job(root)

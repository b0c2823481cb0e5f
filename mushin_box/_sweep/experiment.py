# SPDX-License-Identifier: MIT
"""``load_experiment``: one job directory (or, later, a whole sweep) as an xarray Dataset."""

from __future__ import annotations

import itertools
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mushin_box._core.layout import METRICS_FILE, PROVENANCE_FILE, STATUS_FILE, stage_metrics_file
from mushin_box._core.targets import public

__all__ = ["STAGES", "load_experiment", "load_job", "load_sweep"]

# MetricsCallback files and the dimension their series run along
STAGES: dict[str, str] = {"fit": "epoch", "validate": "validate_round", "test": "test_round"}


def _series_variables(stage: str, data: dict[str, list[Any]]) -> dict[str, xr.DataArray]:
    index_dim = STAGES[stage]
    index_key = "epoch" if stage == "fit" else "round"
    index = np.asarray(data.get(index_key, []), dtype=np.int64)
    out: dict[str, xr.DataArray] = {}
    for name, values in data.items():
        if name == index_key:
            continue
        arr = np.asarray(values, dtype=np.float64)
        dims = [index_dim] + [f"{stage}.{name}_dim{i}" for i in range(1, arr.ndim)]
        out[f"{stage}.{name}"] = xr.DataArray(arr, dims=dims, coords={index_dim: index})
    return out


def load_job(path: str | os.PathLike[str]) -> xr.Dataset:
    """One job directory as a Dataset (see :func:`load_experiment`)."""
    from mushin_box._train.metrics import load_metrics_file

    job = Path(path)
    if not job.is_dir():
        raise FileNotFoundError(f"load_experiment: {job} is not a directory")
    variables: dict[str, xr.DataArray] = {}
    for stage in STAGES:
        file = job / stage_metrics_file(stage)
        if file.is_file():
            variables.update(_series_variables(stage, load_metrics_file(file)))
    attrs: dict[str, Any] = {"job_dir": str(job.resolve())}
    config = job / ".hydra" / "config.yaml"
    if config.is_file():
        attrs["config"] = config.read_text(encoding="utf-8")
    return xr.Dataset(variables, attrs=attrs)


def _coord_value(value: Any) -> Any:
    # coordinates must be hashable scalars: lists/dicts become their JSON text
    if isinstance(value, list | dict):
        from mushin_box._core.sidecars import canonical_dumps

        return canonical_dumps(value).decode("utf-8").rstrip("\n")
    return value


def _coords(values: list[Any]) -> np.ndarray[Any, Any]:
    plain = [_coord_value(v) for v in values]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in plain):
        return np.asarray(plain)
    out = np.empty(len(plain), dtype=object)
    out[:] = plain
    return out


def load_sweep(path: str | os.PathLike[str]) -> xr.Dataset:
    """A sweep directory as a Dataset (see :func:`load_experiment`)."""
    from mushin_box._core.sidecars import canonical_dumps, read_json
    from mushin_box._sweep.manifest import (
        cell_records,
        combo_id,
        manifest_from_cells,
        read_manifest,
    )

    root = Path(path)
    manifest = read_manifest(root) or manifest_from_cells(root)  # never written: a reader
    grid: dict[str, list[Any]] = manifest["grid"]
    params = list(grid)
    shape = tuple(len(v) for v in grid.values())
    index = {
        combo_id(dict(zip(params, combo, strict=True))): tuple(idx)
        for idx, combo in zip(np.ndindex(*shape), itertools.product(*grid.values()), strict=True)
    }
    coords = {p: _coords(v) for p, v in grid.items()}
    scalars: dict[str, np.ndarray[Any, Any]] = {}
    series: dict[str, list[tuple[tuple[int, ...], xr.DataArray]]] = {}
    failures: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    status = np.full(shape, "pending", dtype=object)
    cell_dirs = np.full(shape, "", dtype=object)
    for cell_dir, record in cell_records(root):
        where = index.get(combo_id(record["combo"]))
        if where is None:
            continue  # a cell of an earlier, different grid
        state = str(record.get("status"))
        status[where] = state
        cell_dirs[where] = cell_dir.name
        if state == "failed":
            failures.append({"combo": record["combo"], "error": record.get("error")})
        elif state in ("skipped", "timeout"):
            skipped.append(
                {"combo": record["combo"], "status": state, "reason": record.get("reason")}
            )
        if state != "completed":
            continue
        _warn_if_truncated(cell_dir / PROVENANCE_FILE, cell_dir.name)
        metrics = read_json(cell_dir / METRICS_FILE, default={})
        for name, value in (metrics or {}).items():
            if isinstance(value, bool | int | float):
                arr = scalars.setdefault(name, np.full(shape, np.nan))
                arr[where] = float(value)
        for name, da in load_job(cell_dir).data_vars.items():
            series.setdefault(str(name), []).append((where, da))
    dims = params
    # a metric named like a swept parameter ("x") would clash with its coordinate
    variables: dict[str, xr.DataArray] = {
        (f"metrics.{name}" if name in grid else name): xr.DataArray(arr, dims=dims, coords=coords)
        for name, arr in scalars.items()
    }
    for name, parts in series.items():
        aligned = xr.align(*(da for _, da in parts), join="outer")
        extra_dims = list(aligned[0].dims)
        extra_shape = aligned[0].shape
        arr = np.full(shape + extra_shape, np.nan)
        for (where, _), da in zip(parts, aligned, strict=True):
            arr[where] = da.values
        extra_coords = {d: aligned[0][d].values for d in extra_dims if d in aligned[0].coords}
        variables[name] = xr.DataArray(
            arr, dims=dims + extra_dims, coords={**coords, **extra_coords}
        )
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


def _warn_if_truncated(path: Path, cell: str) -> None:
    """Warn when a completed cell's provenance record is not a whole JSON object.

    Only its ends are read (a record can be megabytes; truncation is how a record breaks):
    ``resume=True`` parses it in full and runs the cell again when it is unreadable.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(1)
            handle.seek(max(handle.seek(0, os.SEEK_END) - 2, 0))
            tail = handle.read()
    except FileNotFoundError:
        return
    if head != b"{" or tail.rstrip(b"\n")[-1:] != b"}":
        warnings.warn(
            f"cell {cell}: its {path.name} is unreadable (not a whole JSON object); "
            "diff cannot compare it, and resume=True runs the cell again to rebuild it",
            stacklevel=3,
        )


def is_sweep_dir(path: Path) -> bool:
    from mushin_box._core.layout import MANIFEST_FILE

    return (path / MANIFEST_FILE).is_file() or any(path.glob(f"*/{STATUS_FILE}"))


@public
def load_experiment(path: str | os.PathLike[str]) -> xr.Dataset:
    """Load a sweep directory, or one job directory, as an :class:`xarray.Dataset`.

    **Sweep** (a ``Workflow.run`` working dir): one dimension per swept parameter (its
    grid values as coordinates), one variable per scalar metric the task returned and
    per ``MetricsCallback`` series (with its ``epoch``/``*_round`` dimension appended),
    NaN for failed, skipped or missing cells (a metric named like a swept parameter is
    called ``metrics.<name>``); ``status`` and ``cell_dir`` variables;
    ``attrs["failures"]``/``attrs["skipped"]`` list those cells (JSON text, so they
    survive netCDF). Works on a half-finished sweep.

    **One job**: each ``MetricsCallback`` series becomes a variable named
    ``"<stage>.<metric>"``: ``fit.*`` along ``epoch``, ``test.*`` along ``test_round``,
    ``validate.*`` along ``validate_round``; its Hydra config (YAML text) in ``attrs``.

    Only sidecar files are read; nothing is imported from the experiment.

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
    return load_sweep(root) if is_sweep_dir(root) else load_job(root)

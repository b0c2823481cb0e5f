# SPDX-License-Identifier: MIT
"""The pieces ``load_experiment`` builds a Dataset from, for either kind of sweep: one job's
``MetricsCallback`` series, grid coordinates, and the cells' series laid on the grid.

Design note: a series is read from its canonical-JSON file (``fit_metrics.json``) when there
is one, so a reader imports no torch (seconds on a login node, paid on every look). The
``.pt`` file is read, through torch, only for a job written before the JSON twin existed, or
when the ``.pt`` file is newer than the JSON (an older writer resumed the job). Cells' series
are kept as plain numpy arrays and placed on the grid in one pass: building an xarray object
per cell and aligning a thousand of them costs more than reading the files.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from mushin_box._core.layout import HYDRA_CONFIG_FILE, HYDRA_OUTPUT_SUBDIR, stage_metrics_file
from mushin_box._results.stagefile import read_stage

__all__ = [
    "STAGES",
    "Series",
    "grid_coords",
    "gridded_series",
    "job_series",
    "load_job",
]

# MetricsCallback files and the dimension their series run along
STAGES: dict[str, str] = {"fit": "epoch", "validate": "validate_round", "test": "test_round"}

#: one metric's series: (index dimension, index values, values along the index [+ extra])
Series = tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]


def _index(values: list[Any], index_key: str, stage: str) -> np.ndarray[Any, Any]:
    """A series' index; by position when it holds no whole numbers (a file written before
    the index name was reserved, where a metric logged as ``epoch`` replaced it)."""
    if values and {type(v) for v in values} == {int}:  # the common case, at once
        return np.asarray(values, dtype=np.int64)
    raw = np.asarray(values, dtype=np.float64)
    if raw.size and (not np.isfinite(raw).all() or (raw != np.round(raw)).any()):
        warnings.warn(
            f"{stage_metrics_file(stage)}: its {index_key!r} values are not an index "
            f"(a metric logged as {index_key!r} replaced it, before MetricsCallback reserved "
            f"the name); using positions 0..{raw.size - 1}",
            UserWarning,
            stacklevel=5,
        )
        return np.arange(raw.size, dtype=np.int64)
    return raw.astype(np.int64)


def _stage_series(stage: str, data: Mapping[str, list[Any]]) -> dict[str, Series]:
    index_dim = STAGES[stage]
    index_key = "epoch" if stage == "fit" else "round"
    index = _index(list(data.get(index_key, [])), index_key, stage)
    out: dict[str, Series] = {}
    for name, values in data.items():
        if name == index_key:
            continue
        out[f"{stage}.{name}"] = (index_dim, index, np.asarray(values, dtype=np.float64))
    return out


def job_series(job: str | os.PathLike[str]) -> dict[str, Series]:
    """Every ``MetricsCallback`` series of a job, named ``"<stage>.<metric>"``."""
    try:
        names = frozenset(os.listdir(job))
    except OSError:
        return {}
    out: dict[str, Series] = {}
    for stage in STAGES:
        data = read_stage(job, stage, names)
        if data is not None:
            out.update(_stage_series(stage, data))
    return out


def _as_array(name: str, series: Series) -> xr.DataArray:
    index_dim, index, values = series
    dims = [index_dim] + [f"{name}_dim{i}" for i in range(1, values.ndim)]
    return xr.DataArray(values, dims=dims, coords={index_dim: index})


def job_config(job: Path) -> tuple[dict[str, Any], str] | None:
    """The job's Hydra config (``.hydra/config.yaml``) as a mapping (interpolations kept
    as text) and as its YAML text; ``None`` when it has none."""
    file = job / HYDRA_OUTPUT_SUBDIR / HYDRA_CONFIG_FILE
    if not file.is_file():
        return None
    from omegaconf import OmegaConf

    text = file.read_text(encoding="utf-8")
    mapping = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    return (dict(mapping) if isinstance(mapping, dict) else {}), text  # type: ignore[arg-type]


def load_job(path: str | os.PathLike[str]) -> xr.Dataset:
    """One job directory as a Dataset (see :func:`load_experiment`)."""
    job = Path(path)
    if not job.is_dir():
        raise FileNotFoundError(f"load_experiment: {job} is not a directory")
    variables = {name: _as_array(name, s) for name, s in job_series(job).items()}
    attrs: dict[str, Any] = {"job_dir": str(job.resolve())}
    config = job_config(job)
    if config is not None:
        attrs["config"], attrs["config_yaml"] = config
    return xr.Dataset(variables, attrs=attrs)


def _coord_value(value: Any) -> Any:
    # coordinates must be hashable scalars: lists/dicts become their JSON text
    if isinstance(value, list | dict):
        from mushin_box._core.sidecars import canonical_dumps

        return canonical_dumps(value).decode("utf-8").rstrip("\n")
    return value


def grid_coords(values: list[Any]) -> np.ndarray[Any, Any] | pd.Index:
    """A grid axis as a coordinate: numbers as numbers, anything else as objects, ``None``
    kept. The latter is an index of dtype object, because xarray passes an array of objects
    through pandas, whose string dtype (its default for text from pandas 3) reads ``None``
    as NaN."""
    plain = [_coord_value(v) for v in values]
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

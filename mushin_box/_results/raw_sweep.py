# SPDX-License-Identifier: MIT
"""``load_experiment`` of a plain Hydra ``--multirun`` sweep (no ``Workflow.run``).

Such a sweep (hydra-zen's ``launch(..., multirun=True)``, or an app run with ``--multirun``
through any launcher, ``hydra/launcher=submitit_slurm`` included) leaves job directories
``0/``, ``1/``... holding Hydra's ``.hydra/`` and the ``MetricsCallback`` files, and the
sweep's ``multirun.yaml``; none of ``Workflow.run``'s sidecars.

Design note: Hydra records what each job was given, not how it ended. The grid comes from
the task overrides in ``multirun.yaml`` (a sweep override is a dimension, a constant one is
not), and each job's ``.hydra/overrides.yaml`` places the job on it. Values only the jobs
show (an interval a sampling sweeper drew from) are read from the jobs, and a key whose
value differs between jobs is a dimension too (a sweep directory without
``multirun.yaml``). The metrics are the jobs' ``MetricsCallback`` series. There is no
status variable, since Hydra records none: a job directory exists once its job started,
and a job that failed mid-fit keeps the epochs it wrote.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from mushin_box._core.layout import (
    HYDRA_MULTIRUN_FILE,
    HYDRA_OUTPUT_SUBDIR,
    HYDRA_OVERRIDES_FILE,
    stage_metrics_file,
    stage_metrics_json_file,
)
from mushin_box._results.series import STAGES, Series, grid_coords, gridded_series, job_series

__all__ = ["is_hydra_sweep_dir", "load_hydra_sweep"]

_OVERRIDES = f"{HYDRA_OUTPUT_SUBDIR}/{HYDRA_OVERRIDES_FILE}"
_METRICS_FILES = tuple(stage_metrics_file(stage) for stage in STAGES)
_JSON_FILES = tuple(stage_metrics_json_file(stage) for stage in STAGES)


def is_hydra_sweep_dir(path: Path) -> bool:
    """Is ``path`` the sweep directory of a plain Hydra ``--multirun``?"""
    return (path / HYDRA_MULTIRUN_FILE).is_file() or any(path.glob(f"*/{_OVERRIDES}"))


def _yaml(path: Path) -> Any:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as exc:  # a torn or hand-edited file
        raise ValueError(
            f"load_experiment: cannot read {path} ({type(exc).__name__}: {exc}); restore it "
            "from the job's config, or move the job directory out of the sweep"
        ) from None


def _overrides(texts: Any, where: Path) -> list[tuple[str, Any, str]]:
    """(dimension name, parsed override, value text) per override of a Hydra file."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"load_experiment: {where} is not a list of overrides")
    parser = OverridesParser.create()
    out = []
    for text in texts:
        try:
            (parsed,) = parser.parse_overrides([text])
        except HydraException as exc:
            raise ValueError(f"load_experiment: {where}: bad override {text!r} ({exc})") from None
        if parsed.is_delete() or "=" not in text:
            continue  # '~key' removes a key: no value, no dimension
        name = parsed.key_or_group + (f"@{parsed.package}" if parsed.package else "")
        out.append((name, parsed, text.split("=", 1)[1]))
    return out


def _declared(root: Path) -> dict[str, list[Any] | None]:
    """The sweep's swept keys, from ``multirun.yaml``: their values, or None where the
    sweep is no list (an ``interval`` a sweeper samples from)."""
    from mushin_box._core.overrides import parse_sweep_values

    file = root / HYDRA_MULTIRUN_FILE
    if not file.is_file():
        return {}
    data = _yaml(file)
    hydra = data.get("hydra") if isinstance(data, dict) else None
    overrides = hydra.get("overrides") if isinstance(hydra, dict) else None
    task = overrides.get("task") if isinstance(overrides, dict) else None
    out: dict[str, list[Any] | None] = {}
    for name, parsed, text in _overrides(task or [], file):
        if parsed.is_sweep_override():
            try:
                out[name] = parse_sweep_values(text, keep_interpolations=True)
            except ValueError:
                out[name] = None
    return out


def _job_order(path: Path) -> tuple[int, int, str]:
    return (0, int(path.name), "") if path.name.isdigit() else (1, 0, path.name)


def _jobs(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(job dir, {override name: value}) per job directory, in job order; a directory that
    holds job files but no ``.hydra/overrides.yaml`` is an error naming it."""
    from mushin_box._core.overrides import parse_override_value

    jobs: list[tuple[Path, dict[str, Any]]] = []
    unplaced: list[str] = []
    subdirs = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    for job in sorted(subdirs, key=_job_order):
        file = job / _OVERRIDES
        if file.is_file():
            values = {
                name: parse_override_value(text, keep_interpolations=True)
                for name, _, text in _overrides(_yaml(file), file)
            }
            jobs.append((job, values))
        elif (job / HYDRA_OUTPUT_SUBDIR).is_dir() or any(
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


def _key(value: Any) -> str:
    from mushin_box._core.sidecars import canonical_dumps

    return canonical_dumps(value).decode("utf-8")


def _grid(
    declared: dict[str, list[Any] | None], jobs: list[tuple[Path, dict[str, Any]]]
) -> dict[str, list[Any]]:
    """The swept keys and their values: the declared sweeps, then any key that varies."""
    seen: dict[str, set[str]] = {}  # each key's values over the jobs ("" where it is absent)
    for _, values in jobs:
        for name, value in values.items():
            seen.setdefault(name, set()).add(_key(value))
    for name, texts in seen.items():
        if any(name not in values for _, values in jobs):
            texts.add("")
    params = list(declared) + [
        n for n, texts in seen.items() if n not in declared and len(texts) > 1
    ]
    grid: dict[str, list[Any]] = {}
    for name in params:
        axis = list(declared.get(name) or [])
        known = {_key(v) for v in axis}
        if declared.get(name) is None:  # values only the jobs show
            for _, values in jobs:
                if name in values and _key(values[name]) not in known:
                    known.add(_key(values[name]))
                    axis.append(values[name])
        grid[name] = axis
    return grid


def _place(
    root: Path, grid: dict[str, list[Any]], jobs: list[tuple[Path, dict[str, Any]]]
) -> dict[tuple[int, ...], Path]:
    """Each job's grid index; a job off the grid (of an earlier sweep into the same
    directory) is left out, and of two jobs on one point the later wins, with warnings."""
    axes = {name: {_key(v): i for i, v in enumerate(values)} for name, values in grid.items()}
    placed: dict[tuple[int, ...], Path] = {}
    off: list[str] = []
    for job, values in jobs:
        try:
            where = tuple(axes[name][_key(values[name])] for name in grid)
        except KeyError:
            off.append(job.name)
            continue
        if where in placed:
            warnings.warn(
                f"load_experiment: jobs {placed[where].name} and {job.name} of {root} ran the "
                f"same values; reading {job.name}",
                UserWarning,
                stacklevel=4,
            )
        placed[where] = job
    if off:
        warnings.warn(
            f"load_experiment: job dir(s) {', '.join(off)} of {root} are not on the grid of "
            f"its {HYDRA_MULTIRUN_FILE} ({grid}): an earlier sweep into the same directory; "
            "left out",
            UserWarning,
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
            f"its {HYDRA_MULTIRUN_FILE} declares no sweep; load each with "
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
            UserWarning,
            stacklevel=3,
        )
    elif not series:
        warnings.warn(
            f"load_experiment: no job of the sweep {root} holds a MetricsCallback file "
            f"({', '.join(_METRICS_FILES)}): the Dataset holds the grid only (train with "
            "mushin_box.MetricsCallback to record the series)",
            UserWarning,
            stacklevel=3,
        )
    ds = xr.Dataset(gridded_series(series, shape, params, coords), coords=coords)
    ds["cell_dir"] = xr.DataArray(cell_dirs, dims=params, coords=coords)
    ds.attrs.update(working_dir=str(root.resolve()), params=params, source="hydra --multirun")
    return ds

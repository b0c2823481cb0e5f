# SPDX-License-Identifier: MIT
"""``MetricsCallback`` series as plain lists (no numpy, xarray or torch: ``show`` ranks by
them), and a metric named on the command line as one number per cell.

The JSON twin (``fit_metrics.json``) is read unless the ``.pt`` is newer; a ``.pt`` (torch)
only without the twin, when the caller allows it. A ``--best``/``--sort`` name no cell
returned as a scalar is the last finite value of the fit, else validate, else test series of
that name; ``NAME@last|min|max`` always a series; ``fit.NAME`` names the stage; ``@`` and the
goal combine (``acc@max:max``; ``@max`` implies ``:max``).

Examples
--------
>>> parse_metric("val_loss@min:desc", ("asc", "desc"))
MetricSpec(name='val_loss', reduction='min', goal='desc')
>>> parse_metric("acc:max", ("min", "max"))
MetricSpec(name='acc', reduction=None, goal='max')
>>> reduce_series([3.0, 1.0, 2.0, float("nan")], "last"), reduce_series([3.0, 1.0], "min")
(2.0, 1.0)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import read_limit, stage_metrics_file, stage_metrics_json_file
from mushin_box._core.safeio import open_regular_stat, read_bounded
from mushin_box._core.sidecars import loads
from mushin_box._core.targets import public

#: the ``MetricsCallback`` stages, in the order a bare metric name is looked up, and the
#: dimension each one's series runs along
STAGE_ORDER = ("fit", "validate", "test")
STAGE_DIMS = {"fit": "epoch", "validate": "validate_round", "test": "test_round"}
#: each stage's JSON twin and ``.pt`` file names
_NAMES = {s: (stage_metrics_json_file(s), stage_metrics_file(s)) for s in STAGE_ORDER}


def _mtime(path: str) -> int | None:
    try:
        return os.lstat(path).st_mtime_ns  # a symlink's own: it is refused when read
    except FileNotFoundError:
        return None


_PLAIN = frozenset({int, float, type(None)})


def _is_series(values: Any) -> bool:
    """A list of numbers, or of lists of numbers (a logged vector); NaN is a float."""
    if not isinstance(values, list):
        return False
    if {type(x) for x in values} <= _PLAIN:  # the common case, without a call per value
        return True
    return all(x is None or isinstance(x, int | float) or _is_series(x) for x in values)


def _is_stage_data(data: Any) -> bool:
    return isinstance(data, dict) and all(_is_series(v) for v in data.values())


def read_stage(
    job: str | os.PathLike[str], stage: str, names: frozenset[str], pt: bool
) -> dict[str, list[Any]] | None:
    """A stage's ``MetricsCallback`` data, or ``None`` when the job's entries (``names``)
    hold no file for it; ``pt=False``: the ``.pt`` file is ignored (no torch import)."""
    json_name, pt_name = _NAMES[stage]
    has_pt = pt and pt_name in names
    if json_name not in names and not has_pt:
        return None  # most jobs lack most stages: no path built, no system call
    # os.path, not pathlib: load_experiment reads 10,000 jobs
    json_file, pt_file = os.path.join(job, json_name), os.path.join(job, pt_name)
    pt_time = _mtime(pt_file) if has_pt else None
    # the twin's time matters only beside a .pt file (listed: it is there, or was)
    json_time = None if json_name not in names else 0 if pt_time is None else _mtime(json_file)
    if json_time is not None and (pt_time is None or json_time >= pt_time):
        try:
            data = loads(read_bounded(json_file, read_limit(json_name)))
        except FileNotFoundError:  # removed since it was listed
            if pt_time is None:
                return None
        except (OSError, ValueError, RecursionError) as exc:  # refused: an OSError
            if pt_time is None:
                raise SeriesFileError(
                    json_file,
                    f"is unreadable ({exc}); restore it, or delete it to read the series "
                    "from the .pt file",
                ) from None
        else:
            if not _is_stage_data(data):  # hand-edited or foreign: said, not a TypeError
                raise SeriesFileError(
                    json_file,
                    "is not a MetricsCallback file (a mapping of names to lists of numbers); "
                    "restore it, or delete it",
                )
            return {str(k): list(v) for k, v in data.items()}
    if pt_time is None:
        return None
    data = _load_pt(Path(pt_file))
    if not _is_stage_data(data):
        raise SeriesFileError(pt_file, "is not a MetricsCallback file")
    return data


def _load_pt(file: Path) -> Any:
    """A ``.pt`` series, opened here (no symlink, FIFO or device) and its size checked
    before torch unpickles it through the open descriptor: the file checked is the file
    read."""
    limit = read_limit(file.name)
    try:
        fd, st = open_regular_stat(file)
    except OSError as exc:
        raise SeriesFileError(file, f"is unreadable ({exc})") from None
    try:
        if st.st_size > limit:
            raise SeriesFileError(
                file,
                f"is unreadable ({st.st_size} bytes, over the {limit}-byte limit for a series)",
            )
        opened = Path(f"/proc/self/fd/{fd}")
        # lazy: imports torch (the .pt metrics of old jobs only)
        from mushin_box._train.metrics import load_metrics_file

        try:
            return load_metrics_file(opened if opened.exists() else file)
        except Exception as exc:  # a damaged pickle: torch raises many kinds
            raise SeriesFileError(
                file, f"is not a MetricsCallback file ({type(exc).__name__})"
            ) from None
    finally:
        os.close(fd)


_NUMBERS = frozenset({int, float})

#: one series as plain lists: (index dimension, index values, values; NaN: none that round)
PlainSeries = tuple[str, list[float], list[float]]


def _numbers(values: list[Any]) -> list[float] | None:
    kinds = {type(v) for v in values}
    if kinds <= _NUMBERS:  # the common case, without a call per value
        return [float(v) for v in values] if int in kinds else list(values)
    if not all(v is None or isinstance(v, int | float) for v in values):
        return None  # a logged vector: no curve, no scalar
    return [float("nan") if v is None else float(v) for v in values]


def stage_data(
    job: str | os.PathLike[str], *, pt: bool = True
) -> Iterator[tuple[str, dict[str, list[Any]]]]:
    """Each stage a job has a ``MetricsCallback`` file for, and its data, in STAGE_ORDER."""
    try:
        names = frozenset(os.listdir(job))
    except OSError:
        return
    for stage in STAGE_ORDER:
        data = read_stage(job, stage, names, pt)
        if data is not None:
            yield stage, data


def stage_series(job: str | os.PathLike[str], *, pt: bool = True) -> dict[str, PlainSeries]:
    """A job's scalar series as ``{"<stage>.<metric>": (dimension, index, values)}``; the
    index is the position where the file's is not whole numbers as long as the values.

    >>> import json, tempfile
    >>> job = Path(tempfile.mkdtemp())
    >>> _ = (job / "fit_metrics.json").write_text(json.dumps(
    ...     {"epoch": [0, 1], "loss": [2.0, 1.0], "vec": [[1, 2], [3, 4]]}))
    >>> stage_series(job)
    {'fit.loss': ('epoch', [0.0, 1.0], [2.0, 1.0])}
    """
    out: dict[str, PlainSeries] = {}
    for stage, data in stage_data(job, pt=pt):
        key = "epoch" if stage == "fit" else "round"
        index = _numbers(list(data.get(key, []))) or []
        counts = all(x.is_integer() for x in index)  # whole numbers: once per stage
        for name, values in data.items():
            ys = _numbers(values) if name != key else None
            if ys is None:
                continue
            whole = counts and len(index) == len(ys)
            xs = index if whole else [float(i) for i in range(len(ys))]
            out[f"{stage}.{name}"] = (STAGE_DIMS[stage], xs, ys)
    return out


#: how a series becomes one number per cell (``@last`` is the default)
REDUCTIONS = ("last", "min", "max")


@public
class SeriesFileError(MushinBoxError, ValueError):
    """A job's series file that cannot be read: ``file`` and ``problem`` (naming the fix)
    apart, so a caller words it without cutting text."""

    def __init__(self, file: str | os.PathLike[str], problem: str) -> None:
        self.file, self.problem = str(file), problem
        super().__init__(f"load_experiment: {self.detail}")

    @property
    def detail(self) -> str:
        """The message without the function that raised it: ``FILE PROBLEM``."""
        return f"{self.file} {self.problem}"


@public
class MetricNameError(MushinBoxError, ValueError):
    """A reduction that is not one of :data:`REDUCTIONS`."""


@attrs.frozen
class MetricSpec:
    """``NAME[@REDUCTION][:GOAL]`` split (``None``: not written)."""

    name: str
    reduction: str | None
    goal: str | None

    @property
    def column(self) -> str:
        """The column a series value is shown under (``val_loss@last``)."""
        return f"{self.name}@{self.reduction or 'last'}"


def parse_metric(spec: str, goals: Sequence[str]) -> MetricSpec:
    """Split a ``--best``/``--sort`` value; ``goals``: the suffixes after ``:`` it takes."""
    name, sep, goal = spec.rpartition(":")
    if not (sep and goal in goals and name):
        name, goal = spec, None
    base, at, how = name.rpartition("@")
    if not at:
        return MetricSpec(name, None, goal)
    if how not in REDUCTIONS or not base:
        raise MetricNameError(
            f"{spec!r}: {how!r} is not a reduction of a series; use NAME@last, NAME@min or NAME@max"
        )
    return MetricSpec(base, how, goal)


def reduce_series(values: Sequence[float], how: str) -> float:
    """One number from a series' finite values (NaN: none)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan
    return {"last": finite[-1], "min": min(finite), "max": max(finite)}[how]


@attrs.define
class SeriesReader:
    """Each job's series, read once per command (a job: a cell's directory, or None)."""

    _cache: dict[Path, dict[str, list[float]]] = attrs.Factory(dict)

    def values(
        self, jobs: Sequence[Path | None], spec: MetricSpec
    ) -> tuple[list[float | None], list[str]]:
        """The spec's value per job (None: no such series), and every series name seen: the
        series ``fit.val_loss`` as written, ``val_loss`` in the first stage that has it."""
        keys = [spec.name, *(f"{stage}.{spec.name}" for stage in STAGE_ORDER)]
        out: list[float | None] = []
        seen: set[str] = set()
        for job in jobs:
            if job is not None and job not in self._cache:
                self._cache[job] = {k: v[2] for k, v in stage_series(job, pt=False).items()}
            found: dict[str, list[float]] = self._cache[job] if job is not None else {}
            seen.update(found)
            series = next((found[k] for k in keys if k in found), None)
            out.append(None if series is None else reduce_series(series, spec.reduction or "last"))
        return out, sorted(seen)

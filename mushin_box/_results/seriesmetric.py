# SPDX-License-Identifier: MIT
"""A metric named on the command line, as a number per cell: the scalar the task returned,
or one value of its ``MetricsCallback`` series.

``--best`` and ``--sort`` name a metric. Many tasks return nothing (or ``done``) and log
their metrics through ``MetricsCallback`` only, so a name no cell returned as a scalar is
looked up in the series (``fit_metrics.json``, then ``validate_``/``test_``), and one
value per cell taken from it:

- ``val_loss``: the scalar when a cell returned one, else the series' last epoch (its
  last finite value);
- ``val_loss@last``, ``val_loss@min``, ``val_loss@max``: always the series, its last
  value, or its lowest or highest over the epochs;
- ``fit.val_loss`` (``validate.``, ``test.``) names the stage when a name is in several.

Design note: ``@`` and not ``:``, because ``:min``/``:max`` already say which end of a
ranking is best (``--best acc:max``), and ``:asc``/``:desc`` which way ``--sort`` runs; the
two combine (``--best acc@max:max``; ``@max`` alone implies it). The series are read with
:func:`~mushin_box._results.stagefile.stage_series` (plain JSON: no numpy, no torch), each
cell's file once per command.

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
from collections.abc import Sequence
from pathlib import Path

import attrs

from mushin_box._results.stagefile import STAGE_ORDER, stage_series

__all__ = [
    "REDUCTIONS",
    "MetricNameError",
    "MetricSpec",
    "SeriesReader",
    "parse_metric",
    "reduce_series",
]

#: how a series becomes one number per cell (``@last`` is the default)
REDUCTIONS = ("last", "min", "max")


class MetricNameError(ValueError):
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
    """One number from a series: its last finite value, or its lowest or highest (NaN when
    it has no finite value)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan
    if how == "last":
        return finite[-1]
    return min(finite) if how == "min" else max(finite)


class SeriesReader:
    """Each job's series, read once per command (a job: a cell's directory, or None)."""

    def __init__(self) -> None:
        self._cache: dict[Path, dict[str, list[float]]] = {}

    def series(self, job: Path | None) -> dict[str, list[float]]:
        if job is None:
            return {}
        if job not in self._cache:
            self._cache[job] = {k: v[2] for k, v in stage_series(job, pt=False).items()}
        return self._cache[job]

    def lookup(self, job: Path | None, name: str) -> list[float] | None:
        """The series ``name`` names in this job: ``fit.val_loss`` as written, ``val_loss``
        in the first stage that has it."""
        found = self.series(job)
        if name in found:
            return found[name]
        for stage in STAGE_ORDER:
            if f"{stage}.{name}" in found:
                return found[f"{stage}.{name}"]
        return None

    def values(
        self, jobs: Sequence[Path | None], spec: MetricSpec
    ) -> tuple[list[float | None], list[str]]:
        """The spec's value per job (None: no such series; NaN: no finite value in it), and
        every series name seen (for an error that lists them)."""
        how = spec.reduction or "last"
        out: list[float | None] = []
        seen: set[str] = set()
        for job in jobs:
            series = self.lookup(job, spec.name)
            seen.update(self.series(job))
            out.append(None if series is None else reduce_series(series, how))
        return out, sorted(seen)

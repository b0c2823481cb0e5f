# SPDX-License-Identifier: MIT
"""A cell's metrics sidecar, from the task's return value to ``mushin_metrics.json``.

The sidecar belongs to the cell's current status: an attempt's start moves the earlier
attempt's metrics out of it (:func:`set_aside_metrics`), and a continuing attempt that
returns fewer metrics keeps the missing ones, saying so (:func:`carry_over`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.jobdir import mushin_dir
from mushin_box._core.layout import (
    EARLIER_METRICS_FILE,
    METRICS_FILE,
    STALE_CHECKPOINTS_DIR,
    stage_metrics_json_file,
)
from mushin_box._core.sidecars import read_json

__all__ = ["carry_over", "metrics_from_return", "set_aside_metrics"]


def _plain_metric(value: Any, name: str) -> Any:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if hasattr(value, "tolist"):  # torch tensors, numpy arrays and scalars
        if hasattr(value, "detach"):
            value = value.detach().cpu()
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_plain_metric(v, name) for v in value]
    raise TypeError(
        f"metric {name!r} has type {type(value).__name__}; a task must return a mapping of "
        "metric names to numbers, strings or (nested) lists of numbers"
    )


def metrics_from_return(value: Any) -> dict[str, Any]:
    """The task's return value as the metrics sidecar's content."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            f"the task returned {type(value).__name__}; return a dict of metrics "
            "(e.g. {'loss': 0.1}) or None"
        )
    return {str(k): _plain_metric(v, str(k)) for k, v in value.items()}


def carry_over(
    cell_dir: Path, metrics: dict[str, Any], continues: bool
) -> tuple[dict[str, Any], list[str]]:
    """``metrics`` plus the previous attempt's values of the names it lacks, and those names.

    Design note: an attempt that continues the cell (same fingerprints) and returns fewer
    metrics than are on disk is most likely a fit resumed with nothing left to train,
    which logs nothing (``MetricsCallback.final_metrics`` is the task-side fix). Its
    result must not replace good metrics of the same experiment with fewer: the missing
    names keep their values, with a warning, and the status lists them
    (``metrics_carried_over``). An attempt that starts afresh carries nothing: an earlier
    run's metrics were set aside at its start (:func:`set_aside_metrics`). A continuing
    attempt's start kept them in ``.mushin/earlier-metrics.json``, read here.
    """
    if not continues:
        return metrics, []
    previous = read_json(mushin_dir(cell_dir) / EARLIER_METRICS_FILE, default={})
    missing = sorted(k for k in previous if k not in metrics) if isinstance(previous, dict) else []
    if not missing and not metrics:  # nothing returned, nothing recorded: killed after its fit
        return _restored(cell_dir)
    if not missing:
        return metrics, []
    warnings.warn(
        f"cell {cell_dir.name}: this attempt returned no {', '.join(missing)}; keeping the "
        f"previous attempt's values from {METRICS_FILE} (a fit resumed with nothing left to "
        "train logs nothing: return MetricsCallback.final_metrics(trainer))",
        stacklevel=4,
    )
    return {**metrics, **{k: previous[k] for k in missing}}, missing


def _restored(cell_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The metrics a continuing attempt's checkpoint restored, when the task returned none.

    A cell killed after its fit returned, before its result was recorded, resumes from a
    checkpoint already at ``max_epochs``: the fit trains nothing, and a task that returns
    ``trainer.callback_metrics`` returns ``{}``. The fit's ``MetricsCallback`` series
    (``fit_metrics.json``, restored with the checkpoint) still holds its last values: they
    are the cell's result, said in a warning. Without a series, the warning says that the
    cell has no metrics and how to get them.
    """
    series = read_json(cell_dir / stage_metrics_json_file("fit"), default=None)
    restored: dict[str, Any] = {}
    if isinstance(series, dict):
        for name, values in series.items():
            if name == "epoch" or not isinstance(values, list):
                continue
            last = next((v for v in reversed(values) if isinstance(v, int | float)), None)
            if last is not None and not isinstance(last, bool):
                restored[str(name)] = last
    if not restored:
        warnings.warn(
            f"cell {cell_dir.name}: this attempt continued from a checkpoint, trained "
            "nothing and returned no metrics, and no MetricsCallback series was restored: "
            "the cell has no metrics. Add MetricsCallback to the Trainer and return "
            "MetricsCallback.final_metrics(trainer), or run the cell afresh",
            stacklevel=5,
        )
        return {}, []
    names = sorted(restored)
    warnings.warn(
        f"cell {cell_dir.name}: this attempt continued from a checkpoint and returned no "
        f"metrics; reporting {', '.join(names)} as its checkpoint restored them (the last "
        f"values of {stage_metrics_json_file('fit')}). Return "
        "MetricsCallback.final_metrics(trainer) to report them yourself",
        stacklevel=5,
    )
    return restored, names


def set_aside_metrics(cell_dir: Path, tag: str, continues: bool) -> None:
    """At an attempt's start, move the earlier attempt's metrics out of the cell's sidecar.

    A cell's metrics sidecar belongs to its current status: none beside ``running`` or
    ``failed`` (a completed cell that fails on a re-run must not show its old metrics as
    this attempt's). A continuing attempt keeps them in ``.mushin/earlier-metrics.json``
    for :func:`carry_over`; a fresh start moves them beside its set-aside checkpoints.
    """
    path, earlier = cell_dir / METRICS_FILE, mushin_dir(cell_dir) / EARLIER_METRICS_FILE
    if continues:
        if path.is_file():
            earlier.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, earlier)
        return
    target = mushin_dir(cell_dir) / STALE_CHECKPOINTS_DIR / tag / METRICS_FILE
    for source in (earlier, path):  # the sidecar last: the newer of the two is kept
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)

# SPDX-License-Identifier: MIT
"""What a sweep says about cells that did not complete: one warning per failed or skipped
cell, and a metrics sidecar that always belongs to the cell's current status."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from workflow_tasks import grid_task

from mushin_box import ResumeContext, Workflow, multirun
from mushin_box._core.sidecars import read_json

GRID: dict[str, Any] = {"lr": multirun([0.1, 0.2]), "seed": multirun([0, 1])}


def _ours(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if str(w.message).startswith("cell ")]


def test_a_failed_cell_under_on_error_nan_warns_once_naming_cell_and_reason(
    tmp_path: Path,
) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Workflow(grid_task).run(
            working_dir=tmp_path, on_error="nan", progress=False, fail_at=0.2, **GRID
        )
    messages = _ours(record)
    assert len(messages) == 1, messages
    assert "lr=0.2,seed=1" in messages[0]
    assert "ValueError: planned failure at lr=0.2, seed=1" in messages[0]
    assert all(issubclass(w.category, UserWarning) for w in record if "cell " in str(w.message))


def test_cells_skipped_by_the_time_budget_warn_once_each(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ds = Workflow(grid_task).run(
            working_dir=tmp_path, progress=False, max_total_seconds=1e-9, **GRID
        )
    assert ds["status"].values.ravel().tolist() == ["skipped"] * 4
    messages = _ours(record)
    assert len(messages) == 4, messages
    for cell in ("lr=0.1,seed=0", "lr=0.1,seed=1", "lr=0.2,seed=0", "lr=0.2,seed=1"):
        (message,) = [m for m in messages if m.startswith(f"cell {cell}:")]
        assert "max_total_seconds" in message and "resume=True" in message


def test_a_completed_sweep_is_quiet(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Workflow(grid_task).run(working_dir=tmp_path, progress=False, **GRID)
    assert _ours(record) == []


def attempt_task(p: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """Both metrics, then a failure, then one metric: by attempt number."""
    if mushin_resume.attempt == 2:
        raise ValueError("planned failure")
    if mushin_resume.attempt == 1:
        return {"a": float(p), "b": float(p)}
    return {"a": float(p)}


def test_a_completed_cell_that_fails_on_a_rerun_keeps_no_stale_metrics(tmp_path: Path) -> None:
    wf = Workflow(attempt_task)
    wf.run(working_dir=tmp_path, progress=False, p=1)
    cell = tmp_path / "cell"
    assert read_json(cell / "mushin_metrics.json") == {"a": 1.0, "b": 1.0}
    # an unreadable provenance record: resume runs the completed cell again, continuing
    (cell / "mushin_provenance.json").write_text("{")
    with pytest.warns(UserWarning, match="planned failure"):
        ds = wf.run(working_dir=tmp_path, progress=False, p=1, resume=True, on_error="nan")
    assert read_json(cell / "mushin_status.json")["status"] == "failed"
    assert not (cell / "mushin_metrics.json").exists()  # attempt 1's: not beside "failed"
    assert ds["status"].item() == "failed" and "a" not in ds  # no metrics of attempt 1
    # the next continuing attempt still carries the names it no longer returns over
    with pytest.warns(UserWarning, match="previous attempt"):
        wf.run(working_dir=tmp_path, progress=False, p=1, resume=True)
    assert read_json(cell / "mushin_metrics.json") == {"a": 1.0, "b": 1.0}
    assert read_json(cell / "mushin_status.json")["metrics_carried_over"] == ["b"]

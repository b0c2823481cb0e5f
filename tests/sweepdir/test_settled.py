# SPDX-License-Identifier: MIT
"""``status`` of a finished sweep from its manifest (issue 32): every field ``read_sweep``
gives, without rebuilding the manifest or asking the scheduler; a sweep that may still
change is left to ``read_sweep``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from sweep_files import write_cell
from workflow_tasks import one_failed_sweep

from mushin_box._core.sidecars import write_json_atomic
from mushin_box._sweepdir import manifest
from mushin_box._sweepdir.board import read_sweep
from mushin_box._sweepdir.settled import read_settled


def _views(sweep: Any) -> list[dict[str, Any]]:
    return [attrs.asdict(c) for c in sweep.cells]


@pytest.fixture(scope="module")
def engine_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``Workflow.run`` sweep, one cell failed."""
    return one_failed_sweep(tmp_path_factory.mktemp("engine") / "sweep")


def test_a_finished_sweep_reads_as_read_sweep_reads_it(engine_sweep: Path) -> None:
    settled, whole = read_settled(engine_sweep), read_sweep(engine_sweep)
    assert settled is not None  # the manifest answered
    assert _views(settled) == _views(whole)
    assert (settled.params, settled.run_id, settled.launcher, settled.active) == (
        whole.params,
        whole.run_id,
        whole.launcher,
        whole.active,
    )
    assert settled.counts() == {"completed": 3, "failed": 1}
    assert any(c.host and c.duration_s is not None for c in settled.cells)


def test_the_heading_knows_the_counts_before_any_cell_is_read(engine_sweep: Path) -> None:
    seen: list[Any] = []
    read_settled(engine_sweep, heading=seen.append)
    (view,) = seen
    assert view.counts() == {"completed": 3, "failed": 1}
    assert view.root == engine_sweep  # what the first line names, before any cell's file


def test_a_sweep_that_may_still_change_is_left_to_read_sweep(tmp_path: Path) -> None:
    root = tmp_path / "s"
    for x in (1, 2):
        write_cell(root, {"x": x}, metrics={"loss": float(x)})
    records = list(manifest.cell_records(root))
    manifest.write_manifest(root, grid={"x": [1, 2, 3]}, run_id="r", records=records)
    assert read_settled(root) is None  # x=3 is pending: a driver may still start it


def test_a_failed_cell_a_later_submission_may_run_again_is_left_to_read_sweep(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    root.mkdir()
    # a detached resume's record, older than the manifest, submitted after x=2 failed
    write_json_atomic(
        root / "mushin_jobs.json",
        {
            "cluster": "slurm",
            "jobs": [{"job_id": "7", "overrides": ["x=2"]}],
            "submitted": "2099-01-01T00:00:00+00:00",
        },
    )
    minute_ago = time.time() - 60
    os.utime(root / "mushin_jobs.json", (minute_ago, minute_ago))
    write_cell(root, {"x": 1}, metrics={"loss": 1.0})
    write_cell(root, {"x": 2}, status="failed", error="boom")
    records = list(manifest.cell_records(root))
    manifest.write_manifest(root, grid={"x": [1, 2]}, run_id="r", records=records)
    assert read_settled(root) is None
    (root / "mushin_jobs.json").unlink()
    settled = read_settled(root)
    assert settled is not None and settled.counts() == {"completed": 1, "failed": 1}

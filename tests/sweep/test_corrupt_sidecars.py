# SPDX-License-Identifier: MIT
"""A corrupt provenance record is not reused silently; orphaned temporaries are cleaned up."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from workflow_tasks import marker_task

from mushin_box import Workflow, load_experiment, multirun
from mushin_box._core.layout import PROVENANCE_FILE


def _sweep(root: Path, markers: Path, resume: bool = False):
    return Workflow(marker_task).run(
        working_dir=root,
        resume=resume,
        progress=False,
        x=multirun([1, 2]),
        markers=str(markers),
    )


def test_a_corrupt_provenance_record_is_rebuilt_by_running_the_cell_again(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    record = root / "x=1" / PROVENANCE_FILE
    record.write_text('{"reproducibility": ')  # a writer killed mid-file, by hand
    with pytest.warns(UserWarning, match=rf"x=1.*{PROVENANCE_FILE}.*unreadable"):
        load_experiment(root)
    with pytest.warns(UserWarning, match=r"x=1.*unreadable.*running it again"):
        ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4]
    done = sorted(p.name.split(".")[0] for p in markers.iterdir())
    assert done == ["x=1", "x=1", "x=2"]  # x=1 computed again, x=2 reused
    assert set(json.loads(record.read_text())) >= {"reproducibility", "run"}


def test_orphaned_temporaries_of_killed_writers_are_removed_by_the_next_run(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    old = root / "x=1" / ".mushin_status.json.4242.0123456789abcdef.tmp"
    young = root / "x=2" / ".mushin_metrics.json.4243.0123456789abcdef.tmp"
    mine = root / "x=2" / "notes.tmp"  # not a sidecar temporary: never touched
    for path in (old, young, mine):
        path.write_text("{")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    os.utime(mine, (hour_ago, hour_ago))
    _sweep(root, markers, resume=True)
    assert not old.exists()
    assert young.exists() and mine.exists()  # a writer may still be at work on a young one

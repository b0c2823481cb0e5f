# SPDX-License-Identifier: MIT
"""``Workflow.run(..., wait=False)`` and ``SweepHandle``: submit and return at once; the
handle, rebuilt from the directory alone, follows, waits for and cancels the sweep."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from workflow_tasks import marker_task

from mushin_box import SweepHandle, Workflow, multirun
from mushin_box._core.layout import JOBS_FILE, MANIFEST_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._sweepdir.manifest import SweepLock


@pytest.mark.parametrize("launcher", [None, "basic", "submitit_local"])
def test_wait_false_needs_a_launcher_whose_jobs_outlive_the_driver(
    tmp_path: Path, launcher: str | None
) -> None:
    with pytest.raises(ValueError, match="wait=False needs a launcher whose jobs outlive"):
        Workflow(marker_task).run(
            x=multirun([1]),
            markers=str(tmp_path / "m"),
            working_dir=tmp_path / "sweep",
            launcher=launcher,
            wait=False,
        )
    assert not (tmp_path / "sweep").exists()  # refused before anything was written


def test_a_handle_times_out_while_the_sweep_still_goes(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / MANIFEST_FILE, {"grid": {"x": [1]}, "cells": {}})
    handle = SweepHandle(tmp_path)
    with SweepLock(tmp_path):
        assert not handle.done()
        with pytest.raises(TimeoutError, match="still running after 0.2 s"):
            handle.wait(timeout_s=0.2, interval_s=0.05)
    assert handle.done() and repr(handle) == f"SweepHandle({str(tmp_path)!r})"


@pytest.mark.slow
def test_a_detached_local_sweep_runs_on_and_a_rebuilt_handle_collects_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = Path(__file__).resolve().parents[1]  # the jobs unpickle workflow_tasks
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")])
    )
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    t0 = time.monotonic()
    handle = Workflow(marker_task).run(
        x=multirun([1, 2]),
        markers=str(markers),
        sleep_s=2.0,
        working_dir=root,
        launcher="mushin_local",
        launcher_config={"poll_interval_s": 0.2},
        wait=False,
    )
    returned_after = time.monotonic() - t0
    assert isinstance(handle, SweepHandle)
    submission = read_json(root / JOBS_FILE)
    assert submission["cluster"] == "local" and submission["detached"] is True
    assert len(submission["jobs"]) == 2
    assert not list(markers.glob("*.done")) or returned_after < 2.0  # not waited for
    again = SweepHandle(root)  # from the directory alone
    ds = again.wait(timeout_s=120, interval_s=0.2)
    assert ds["status"].values.tolist() == ["completed", "completed"]
    assert ds["x2"].values.tolist() == [2.0, 4.0]
    assert len(list(markers.glob("*.done"))) == 2

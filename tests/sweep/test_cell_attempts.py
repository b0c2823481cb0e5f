# SPDX-License-Identifier: MIT
"""A cell's attempts are counted by the one counter (``.mushin/attempt.json``), which the
status and ``mushin_resume.attempt`` both report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workflow_tasks import ckpt_probe_task, resume_task

from mushin_box import Workflow
from mushin_box._core.sidecars import read_json


def _attempts(cell: Path) -> tuple[int, int]:
    """(the status's attempt, the counter's)."""
    status = read_json(cell / "mushin_status.json")
    counter = read_json(cell / ".mushin" / "attempt.json")
    return status["attempt"], counter["attempt"]


def test_the_status_reports_the_counter_and_a_reuse_counts_nothing(tmp_path: Path) -> None:
    wf = Workflow(resume_task)
    ds = wf.run(working_dir=tmp_path, progress=False, x=1)
    assert float(ds["attempt"]) == 1.0
    assert _attempts(tmp_path / "cell") == (1, 1)
    ds = wf.run(working_dir=tmp_path, progress=False, x=1, resume=True)  # reused
    assert float(ds["attempt"]) == 1.0
    assert _attempts(tmp_path / "cell") == (1, 1)
    ds = wf.run(working_dir=tmp_path, progress=False, x=1)  # no resume: runs again
    assert float(ds["attempt"]) == 2.0
    assert _attempts(tmp_path / "cell") == (2, 2)


def test_a_cell_from_before_the_counter_continues_its_count(tmp_path: Path) -> None:
    wf = Workflow(resume_task)
    wf.run(working_dir=tmp_path, progress=False, x=1)
    cell = tmp_path / "cell"
    (cell / ".mushin" / "attempt.json").unlink()
    status = read_json(cell / "mushin_status.json")
    (cell / "mushin_status.json").write_text(json.dumps({**status, "attempt": 3}))
    ds = wf.run(working_dir=tmp_path, progress=False, x=1)
    assert float(ds["attempt"]) == 4.0
    assert _attempts(cell) == (4, 4)


def test_a_multi_rank_cell_counts_each_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")  # this process looks like one rank of two
    monkeypatch.setenv("RANK", "0")
    wf = Workflow(ckpt_probe_task)
    wf.run(working_dir=tmp_path, progress=False, x=1)
    wf.run(working_dir=tmp_path, progress=False, x=1)
    assert _attempts(tmp_path / "cell") == (2, 2)
    counter = read_json(tmp_path / "cell" / ".mushin" / "attempt.json")
    assert counter["start"].endswith(":-:0:0")  # run id, no SLURM job, no restart

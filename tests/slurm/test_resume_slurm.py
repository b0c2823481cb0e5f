# SPDX-License-Identifier: MIT
"""On the local cluster: cancelling a sweep whose cells never started records them
``cancelled`` (not ``pending`` for good), and ``mushin-box resume DIR`` then runs them with
the launch's recorded overrides, a scheduler flag changed on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

EXP = """
from mushin_box import Workflow


def task(x: int = 1, tag: str = "a") -> dict:
    return {"y": float(x), "tagged_b": float(tag == "b")}


workflow = Workflow(task)
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=480,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def _states(work: Path, cwd: Path) -> dict[str, str]:
    proc = _cli("status", str(work), "--json", cwd=cwd)
    cells = json.loads(proc.stdout)["cells"]
    return {json.dumps(c["combo"], sort_keys=True): c["state"] for c in cells}


def test_cancel_unstarted_cells_then_resume_dir_runs_the_recorded_launch(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    (tmp_path / "exp.py").write_text(EXP)
    work = tmp_path / "sweep"
    name = f"resume-{tmp_path.name}"[:60]
    proc = _cli(
        "launch", "exp.py", "x=1,2", "tag=b", "--time", "5", "--job-name", name,
        "--sbatch", "begin=now+1hour", "--detach", "--working-dir", str(work), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(_states(work, tmp_path).values()) == {"pending"}

    proc = _cli("cancel", str(work), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "x=1: cancelled" in proc.stdout and "x=2: cancelled" in proc.stdout
    assert f"mushin-box resume {work}" in proc.stdout
    assert set(_states(work, tmp_path).values()) == {"cancelled"}

    # from another directory: the record says where the launch ran, and what it was
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _cli("resume", str(work), "--dry-run", "--sbatch", "begin=now", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 of 2 cell(s) run" in proc.stdout and "x=1,2 tag=b" in proc.stdout
    proc = _cli("resume", str(work), "--sbatch", "begin=now", "--no-progress", cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert set(_states(work, tmp_path).values()) == {"completed"}
    for x in (1, 2):
        metrics = json.loads((work / f"x={x}" / "mushin_metrics.json").read_text())
        assert metrics == {"y": float(x), "tagged_b": 1.0}  # the recorded tag=b
    # a finished sweep: nothing left to run costs nothing
    proc = _cli("resume", str(work), "--dry-run", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GPU-hours   at most 0 = 0 cell(s) to run of 2" in proc.stdout, proc.stdout

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
    assert "nothing to submit" in proc.stdout and "#SBATCH" not in proc.stdout  # no script


SLOW_EXP = """
import os
import time

from mushin_box import Workflow


def task(x: int = 1) -> dict:
    if x == 1:
        time.sleep(120)  # runs while the other cell is resumed
    if str(x) == os.environ.get("FAIL_X"):
        raise RuntimeError("asked to fail")
    return {"y": float(x)}


workflow = Workflow(task)
"""


def _poll(work: Path, cwd: Path, wanted: dict[str, str], timeout_s: float = 240) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = _states(work, cwd)
        if all(states.get(k) == v for k, v in wanted.items()):
            return
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {wanted}: {_states(work, cwd)}")


def test_one_cell_is_resumed_while_another_runs(slurm_cluster: Any, tmp_path: Path) -> None:
    (tmp_path / "exp.py").write_text(SLOW_EXP)
    work = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", "exp.py", "x=1,2", "--time", "5",
         "--detach", "--working-dir", str(work)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "FAIL_X": "2"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = json.dumps({"x": 1}), json.dumps({"x": 2})
    _poll(work, tmp_path, {one: "running", two: "failed"})
    running = json.loads((work / "x=1" / "mushin_status.json").read_text())

    proc = _cli("resume", str(work), "x=1", cwd=tmp_path)  # live: never run twice
    assert proc.returncode == 2 and "still run or are queued" in proc.stderr, proc.stderr
    proc = _cli("resume", str(work), "x=2", "--detach", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    _poll(work, tmp_path, {two: "completed"})
    assert _states(work, tmp_path)[one] == "running"
    now = json.loads((work / "x=1" / "mushin_status.json").read_text())
    assert now["slurm_job_id"] == running["slurm_job_id"] and now["attempt"] == 1
    jobs = [j["job_id"] for j in json.loads((work / "mushin_jobs.json").read_text())["jobs"]]
    assert running["slurm_job_id"] in jobs  # still listed: cancel and status find it

    proc = _cli("cancel", str(work), cwd=tmp_path)  # the whole sweep: the carried job too
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _states(work, tmp_path) == {one: "cancelled", two: "completed"}


def test_cancelling_one_pending_cell_records_it_alone(slurm_cluster: Any, tmp_path: Path) -> None:
    (tmp_path / "exp.py").write_text(EXP)
    work = tmp_path / "sweep"
    proc = _cli(
        "launch", "exp.py", "x=1,2", "--time", "5", "--sbatch", "begin=now+1hour",
        "--detach", "--working-dir", str(work), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = json.dumps({"x": 1}), json.dumps({"x": 2})
    proc = _cli("cancel", str(work), "x=1", cwd=tmp_path)  # named by its values
    assert proc.returncode == 0 and "x=1: cancelled" in proc.stdout, proc.stdout + proc.stderr
    assert _states(work, tmp_path) == {one: "cancelled", two: "pending"}
    proc = _cli("cancel", str(work), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _states(work, tmp_path) == {one: "cancelled", two: "cancelled"}

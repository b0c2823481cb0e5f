# SPDX-License-Identifier: MIT
"""A cell whose recorded owner (process, SLURM job) still runs is never started again."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO
from workflow_tasks import marker_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import STATUS_FILE
from mushin_box._sweepdir import liveness
from mushin_box._sweepdir.liveness import Owner, check, owner_of, process_start

# a process that takes over cell x=1 as the project's own runner records it, then stays
OWN_CELL = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mushin_box._core.sidecars import read_json, write_json_atomic
    from mushin_box._sweepdir.liveness import owner_fields
    status = Path(sys.argv[1])
    write_json_atomic(status, {**read_json(status), "status": "running", **owner_fields()})
    print("ready", flush=True)
    time.sleep(600)
    """
)


def _sweep(root: Path, markers: Path, resume: bool = False):
    return Workflow(marker_task).run(
        working_dir=root, resume=resume, progress=False, x=multirun([1, 2]), markers=str(markers)
    )


def _counts(markers: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in markers.glob("*.done"):
        counts[p.name.split(".")[0]] = counts.get(p.name.split(".")[0], 0) + 1
    return counts


def _owning_process(status: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWN_CELL, str(status)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_resume_refuses_a_cell_whose_process_still_runs_then_runs_it_once_it_died(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    proc = _owning_process(root / "x=1" / STATUS_FILE)
    try:
        with pytest.raises(RuntimeError) as refused:
            _sweep(root, markers, resume=True)
        message = str(refused.value)
        assert f"x=1 (process {proc.pid} on {socket.gethostname()})" in message
        assert "stop them with `mushin-box cancel <sweep dir> x=1`" in message
        assert "kill" not in message and "x=2" not in message  # cancel checks the pid first
        assert _counts(markers) == {"x=1": 1, "x=2": 1}  # nothing ran
        assert json.loads((root / "x=1" / STATUS_FILE).read_text())["status"] == "running"
    finally:
        proc.kill()
        proc.wait()
    ds = _sweep(root, markers, resume=True)  # its owner died: interrupted, so it runs again
    assert ds["x2"].values.tolist() == [2, 4]
    assert _counts(markers) == {"x=1": 2, "x=2": 1}


def test_a_process_is_alive_only_with_its_recorded_start(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        host = socket.gethostname()
        start = process_start(proc.pid)
        assert start is not None
        assert check(Owner(host=host, pid=proc.pid, pid_start=start)).alive
        reused = check(Owner(host=host, pid=proc.pid, pid_start=start + "0"))
        assert not reused.alive and "another" in reused.reason  # the pid was given again
    finally:
        proc.kill()
    # killed, not yet reaped: a zombie still has its pid, but runs nothing
    deadline = time.monotonic() + 30
    while (Path("/proc") / str(proc.pid) / "stat").read_text().split(")")[-1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not check(Owner(host=host, pid=proc.pid, pid_start=start)).alive
    proc.wait()
    assert not check(Owner(host=host, pid=proc.pid, pid_start=start)).alive
    assert not check(Owner(host=host, pid=os.getpid())).alive  # this process: interrupted


def test_owners_that_cannot_be_checked_count_as_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = Owner(host="another-node", pid=123)
    answer = check(elsewhere)
    assert answer.alive and "another host" in answer.reason
    message = liveness.still_running_message([("x=1", elsewhere)])
    assert "cancel or run again there" in message and "kill" not in message
    assert f"delete that cell's {STATUS_FILE}" in message
    job = Owner(host="another-node", pid=123, slurm_job="77_3")
    monkeypatch.setattr(liveness.shutil, "which", lambda name: None)  # no SLURM tools here
    assert check(job, job_state=lambda j: None).alive


def test_slurm_jobs_decide_unless_the_job_is_the_checkers_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    gone = Owner(host=socket.gethostname(), pid=2**22 + 1, slurm_job="77_3")
    assert check(gone, job_state=lambda j: "RUNNING").alive  # the job may run it again
    timeout = check(gone, job_state=lambda j: "TIMEOUT")
    assert not timeout.alive and timeout.job_state == "TIMEOUT"
    message = liveness.still_running_message([("x=1", gone)])
    assert "x=1 (SLURM job 77_3)" in message and "scancel" not in message  # cancel checks it
    # a local sweep inside an salloc session: its own job says nothing about the cell
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    mine = Owner(host=socket.gethostname(), pid=2**22 + 1, slurm_job="77")
    assert not check(mine, job_state=lambda j: "RUNNING").alive
    assert owner_of({"status": "running"}) is None  # an old status names no owner


GATED = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    def gated_task(x: int, gate: str) -> dict:
        Path(gate, f"started.{x}").write_text(str(os.getpid()))
        deadline = time.monotonic() + 120
        while not Path(gate, "go").exists():  # held running until the test opens the gate
            if time.monotonic() > deadline:
                raise TimeoutError("the test never opened the gate")
            time.sleep(0.05)
        Path(gate, f"done.{x}.{os.getpid()}").write_text("")
        return {"x2": 2 * x}
    """
)

DRIVER = textwrap.dedent(
    """
    import sys
    from mushin_box import Workflow, multirun
    from gated import gated_task
    Workflow(gated_task).run(working_dir=sys.argv[1], launcher="submitit_local",
                             launcher_config={"timeout_min": 5}, progress=False,
                             resume=True, x=multirun([1, 2]), gate=sys.argv[2])
    """
)


@pytest.mark.slow
def test_a_killed_submitit_local_driver_leaves_cells_that_resume_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gated.py").write_text(GATED)
    (tmp_path / "driver.py").write_text(DRIVER)
    root, gate = tmp_path / "sweep", tmp_path / "gate"
    gate.mkdir()
    paths = [str(tmp_path), str(REPO)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    argv = [sys.executable, str(tmp_path / "driver.py"), str(root), str(gate)]
    driver = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 120
        while len(list(gate.glob("started.*"))) < 2:  # both cells run, in their own processes
            assert time.monotonic() < deadline and driver.poll() is None
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
        # the cells outlive their driver; a resume must not start them a second time
        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert rerun.returncode != 0
        assert "cells of this sweep are still running: x=1 (process" in rerun.stderr
        assert "x=2 (process" in rerun.stderr
    finally:
        (gate / "go").write_text("")
        if driver.poll() is None:
            driver.kill()
    deadline = time.monotonic() + 60
    while len(list(gate.glob("done.*"))) < 2:  # the orphaned cells finish and record it
        assert time.monotonic() < deadline
        time.sleep(0.05)
    statuses = lambda: [json.loads(p.read_text())["status"] for p in root.glob(f"*/{STATUS_FILE}")]  # noqa: E731
    while statuses() != ["completed", "completed"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert len(list(gate.glob("done.*"))) == 2  # reused: each cell computed once

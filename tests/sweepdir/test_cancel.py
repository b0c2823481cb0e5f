# SPDX-License-Identifier: MIT
"""``mushin-box cancel``: running cells stopped and recorded ``cancelled``, completed cells
never touched, a process tree that ignores SIGTERM killed after the grace period, and
``resume=True`` runs the cancelled cells again."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from workflow_tasks import sleepy_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import STATUS_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._sweepdir.cancel import cancel
from mushin_box._sweepdir.liveness import pid_alive, process_start, process_tree
from mushin_box.cli.main import main

TESTS = Path(__file__).resolve().parents[1]

# a "cell" process that ignores SIGTERM, with a child (a rank) that ignores it too
_TREE = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


def _poll(predicate: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_tree_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    cell = tmp_path / "x=1"
    parent = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert set(process_tree(parent.pid)) >= {parent.pid, child}
        running = {"combo": {"x": 1}, "status": "running", "attempt": 1}
        write_json_atomic(
            cell / STATUS_FILE,
            {
                **running,
                "host": socket.gethostname(),
                "pid": parent.pid,
                "pid_start": process_start(parent.pid),  # only a verified process is signalled
            },
        )
        write_json_atomic(
            tmp_path / "x=2" / STATUS_FILE, {"combo": {"x": 2}, "status": "completed"}
        )
        before = (tmp_path / "x=2" / STATUS_FILE).read_bytes()
        t0 = time.monotonic()
        report = cancel(tmp_path, grace_s=0.5, timeout_s=30)
        assert report.cancelled == ("x=1",) and report.unreachable == ()
        assert ("x=2", "completed") in report.untouched
        parent.wait(timeout=10)
        assert not pid_alive(child) and time.monotonic() - t0 < 30
        record = read_json(cell / STATUS_FILE)
        assert record["status"] == "cancelled" and "mushin-box cancel" in record["reason"]
        assert (tmp_path / "x=2" / STATUS_FILE).read_bytes() == before
    finally:
        parent.kill()
        parent.wait()


def test_an_unknown_cell_is_a_usage_error_listing_the_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json_atomic(tmp_path / "x=1" / STATUS_FILE, {"combo": {"x": 1}, "status": "completed"})
    assert main(["cancel", str(tmp_path), "x=3"]) == 2
    err = capsys.readouterr().err
    assert "no cell x=3 in this sweep; its cells: x=1" in err and len(err.splitlines()) == 1


def test_a_cell_on_another_host_is_named_not_touched(tmp_path: Path) -> None:
    running = {"combo": {"x": 1}, "status": "running", "host": "elsewhere", "pid": 1}
    write_json_atomic(tmp_path / "x=1" / STATUS_FILE, running)
    report = cancel(tmp_path, grace_s=0)
    assert report.unreachable == (("x=1", "runs on elsewhere: cancel it from there"),)
    assert read_json(tmp_path / "x=1" / STATUS_FILE)["status"] == "running"


_DRIVER = """
import sys
from workflow_tasks import sleepy_task
from mushin_box import Workflow, multirun
Workflow(sleepy_task).run(x=multirun([1, 2]), sleep_at=2, started=sys.argv[2],
                          working_dir=sys.argv[1], progress=False)
"""


@pytest.mark.slow
def test_cancel_a_running_sweep_then_resume_runs_only_the_cancelled_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, started = tmp_path / "sweep", tmp_path / "started"
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(sweep), str(started)],
        env={**os.environ, "PYTHONPATH": path},
    )
    try:
        _poll(started.exists, 120)
        done = (sweep / "x=1" / STATUS_FILE).read_bytes()
        assert main(["cancel", str(sweep), "--grace", "5"]) == 0
        out = capsys.readouterr().out
        assert "x=2: cancelled" in out and "1 completed cell(s) left as they are: x=1" in out
        driver.wait(timeout=30)  # the in-process launcher: the cell's process is the driver
    finally:
        driver.kill()
        driver.wait()
    assert read_json(sweep / "x=2" / STATUS_FILE)["status"] == "cancelled"
    assert (sweep / "x=1" / STATUS_FILE).read_bytes() == done
    assert main(["status", str(sweep)]) == 1
    ds = Workflow(sleepy_task).run(
        x=multirun([1, 2]),
        sleep_at=2,
        started=str(started),
        working_dir=sweep,
        progress=False,
        resume=True,
    )
    assert list(ds["status"].values) == ["completed", "completed"]
    assert (sweep / "x=1" / STATUS_FILE).read_bytes() == done  # reused, not run again
    assert read_json(sweep / "x=2" / STATUS_FILE)["attempt"] == 2


def test_a_queued_cell_that_starts_while_cancel_runs_is_cancelled_not_unreadable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SLURM may start a queued cell between cancel's read of the sweep and its scancel:
    the cell then has a ``running`` status when cancel looks for cells that never started.
    Its job is gone once the queue is empty, so it is recorded ``cancelled``, and the cancel
    succeeds (it used to say a status could not be read, and the CLI exited 1)."""
    import mushin_box._sweepdir.cancel as cancel_mod
    from mushin_box._sweepdir.manifest import write_grid

    write_json_atomic(tmp_path / "x=1" / STATUS_FILE, {"combo": {"x": 1}, "status": "completed"})
    write_grid(tmp_path, {"x": [1, 2]})  # x=2: queued, no directory yet
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    started = {"combo": {"x": 2}, "status": "running", "attempt": 1, "host": host}
    started.update(pid=dead.pid, pid_start="0")  # its job's process, ended by the scancel

    def scancel_after_the_start(job_ids: list[str]) -> None:
        write_json_atomic(tmp_path / "x=2" / STATUS_FILE, started)  # the job started...

    monkeypatch.setattr(cancel_mod, "scancel", scancel_after_the_start)  # ...then ended
    report = cancel(tmp_path, grace_s=0, timeout_s=5)
    assert report.unreachable == () and report.cancelled == ("x=2",)
    assert ("x=1", "completed") in report.untouched
    record = read_json(tmp_path / "x=2" / STATUS_FILE)
    assert record["status"] == "cancelled" and "mushin-box cancel" in record["reason"]
    assert read_json(tmp_path / "x=1" / STATUS_FILE)["status"] == "completed"

    # a cell that started and completed on its own in that window is left as it is
    finished = {"combo": {"x": 3}, "status": "completed", "attempt": 1}
    write_grid(tmp_path, {"x": [1, 2, 3]})
    monkeypatch.setattr(
        cancel_mod,
        "scancel",
        lambda ids: write_json_atomic(tmp_path / "x=3" / STATUS_FILE, finished),
    )
    report = cancel(tmp_path, grace_s=0, timeout_s=5)
    assert report.unreachable == () and ("x=3", "completed") in report.untouched
    assert read_json(tmp_path / "x=3" / STATUS_FILE)["status"] == "completed"

    # one whose owner still runs (a job of other cells too, not cancelled) is not marked
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        alive = {"combo": {"x": 4}, "status": "running", "attempt": 1, "host": host}
        alive.update(pid=owner.pid, pid_start=process_start(owner.pid))
        write_grid(tmp_path, {"x": [1, 2, 3, 4]})
        monkeypatch.setattr(
            cancel_mod,
            "scancel",
            lambda ids: write_json_atomic(tmp_path / "x=4" / STATUS_FILE, alive),
        )
        report = cancel(tmp_path, grace_s=0, timeout_s=5)
        assert report.unreachable == (("x=4", cancel_mod.STILL_OWNED),)
        assert read_json(tmp_path / "x=4" / STATUS_FILE)["status"] == "running"
    finally:
        owner.kill()
        owner.wait()


def test_cells_that_start_while_cancel_runs_are_judged_by_one_scheduler_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many queued cells that SLURM started between cancel's read and its scancel: their
    jobs' states are asked once, not once per cell (each ask is a sacct or squeue)."""
    import mushin_box._sweepdir.cancel as cancel_mod
    from mushin_box._sweepdir.manifest import write_grid

    n = 20
    write_json_atomic(tmp_path / "x=0" / STATUS_FILE, {"combo": {"x": 0}, "status": "completed"})
    write_grid(tmp_path, {"x": list(range(n + 1))})
    host = socket.gethostname()

    def scancel_after_they_started(job_ids: list[str]) -> None:
        for x in range(1, n + 1):
            started = {"combo": {"x": x}, "status": "running", "attempt": 1, "host": host}
            started.update(pid=2**22 + x, slurm_job_id=f"5_{x}")
            write_json_atomic(tmp_path / f"x={x}" / STATUS_FILE, started)

    asked: list[list[str]] = []
    monkeypatch.setattr(cancel_mod, "scancel", scancel_after_they_started)
    monkeypatch.setattr(
        cancel_mod,
        "job_states",
        lambda ids, **_: asked.append(ids) or dict.fromkeys(ids, "CANCELLED"),
    )
    report = cancel(tmp_path, grace_s=0, timeout_s=5)
    assert sorted(report.cancelled) == sorted(f"x={x}" for x in range(1, n + 1))
    assert [len(ids) for ids in asked if any(j.startswith("5_") for j in ids)] == [n]


def test_cancel_of_a_finished_sweep_is_a_line_per_state_not_per_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from many_cells import many_cells

    sweep = many_cells(tmp_path / "sweep", 4, 5)
    assert main(["cancel", str(sweep)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["20 completed cell(s) left as they are: a=0,b=0, a=0,b=1, a=0,b=2 and 17 more"]
    assert main(["cancel", str(sweep), "a=1,b=2"]) == 0  # named: answered by name
    assert capsys.readouterr().out.splitlines() == ["a=1,b=2: completed, left as it is"]


def test_a_status_that_could_not_be_read_marks_no_cell_cancelled(tmp_path: Path) -> None:
    """A status not read may be a queued cell that ran: no cell that never started is
    marked ``cancelled`` then, each is named with the reason instead."""
    from mushin_box._core.layout import MANIFEST_FILE
    from mushin_box._sweepdir.manifest import write_grid

    write_json_atomic(tmp_path / "x=1" / STATUS_FILE, {"combo": {"x": 1}, "status": "completed"})
    write_grid(tmp_path, {"x": [1, 2, 3]})  # x=2, x=3: queued
    (tmp_path / "x=2").mkdir()
    (tmp_path / "x=2" / STATUS_FILE).write_text("{half written")  # x=2 started, or not
    before = (tmp_path / MANIFEST_FILE).read_bytes()
    with pytest.warns(UserWarning, match="corrupt sidecar"):
        report = cancel(tmp_path, grace_s=0, timeout_s=5)
    why = "not started, and a cell's status could not be read (see the warnings)"
    assert report.cancelled == () and report.unreachable == (("x=2", why), ("x=3", why))
    assert (tmp_path / MANIFEST_FILE).read_bytes() == before
    assert (tmp_path / "x=2" / STATUS_FILE).read_text() == "{half written"

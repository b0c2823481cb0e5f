# SPDX-License-Identifier: MIT
"""``mushin-box launch EXP --torchrun --gpus G``: each cell's ranks as ``torchrun
--standalone`` workers here (CPU ranks, gloo), recorded as torchrun, the same experiment as
a HydraDDP run of it (``diff`` exits 0); and its usage errors (exit 2, one line), SLURM's
``--nodes MIN:MAX`` included (SLURM runs: tests/slurm/test_torchrun_slurm.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from killing_exp import KILLING_EXP

from mushin_box._core.sidecars import read_json

EXP = REPO / "examples" / "exp.py"


def launch(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--torchrun", "--slurm", "--nodes", "4:2"], "MIN (4) is more than MAX (2)"),
        (["--slurm", "--nodes", "1:2"], "is torchrun's elastic membership: add --torchrun"),
        (["--local", "--torchrun", "--nodes", "1:2"], "--nodes 2 needs SLURM"),
        (["--local", "--max-restarts", "1"], "--max-restarts sets torchrun's restarts"),
        (["--local", "--torchrun", "--max-restarts", "-1"], "must be an integer >= 0"),
        (["--local", "--torchrun", "--nodes", "2"], "--nodes 2 needs SLURM"),
    ],
)
def test_torchrun_usage_errors_exit_2_in_one_line(args: list[str], message: str) -> None:
    proc = launch(str(EXP), *args, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], proc.stderr


@pytest.mark.slow
def test_two_torchrun_workers_here_are_the_same_experiment_as_hydraddp(tmp_path: Path) -> None:
    # a copy outside the repository: the records then hold no git state, which other work
    # in this checkout could change between the two launches
    exp = tmp_path / "exp" / "exp.py"
    exp.parent.mkdir()
    exp.write_text(EXP.read_text())
    runs = {"torchrun": ["--torchrun"], "hydraddp": []}
    for name, extra in runs.items():
        proc = launch(
            str(exp),
            "--gpus",
            "2",
            "--local",
            *extra,
            "--working-dir",
            str(tmp_path / name),
            "--no-progress",
            "trainer.max_epochs=2",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    cell = tmp_path / "torchrun" / "cell"
    assert read_json(cell / "mushin_status.json")["status"] == "completed"
    run = read_json(cell / "mushin_provenance.json")["run"]
    assert run["launcher"]["kind"] == "torchrun" and run["launcher"]["tasks"] == 2
    # torchrun --standalone: its c10d store on a free local port, under torchrun's own id
    assert run["rendezvous"]["backend"] == "c10d"
    assert run["rendezvous"]["endpoint"] == "localhost:0" and run["rendezvous"]["id"]
    assert run["topology"]["world_size"] == 2
    assert [r[:3] for r in run["topology"]["ranks"]] == [[0, 0, 0], [1, 1, 0]]
    # the job is recorded like any local job: status, wait and cancel find it
    assert read_json(tmp_path / "torchrun" / "mushin_jobs.json")["cluster"] == "local"
    diff = subprocess.run(
        [sys.executable, "-m", "mushin_box", "diff", str(tmp_path / "hydraddp" / "cell")]
        + [str(cell), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr
    got = json.loads(diff.stdout)
    assert got["verdict"] == "same experiment, same results"
    assert "run.launcher.kind" in diff.stdout  # expected to differ, and said


def _epochs(log: Path) -> list[tuple[str, int]]:
    """(pid, epoch) of every epoch a rank started (MUSHIN_TEST_RANK_LOG), in order."""
    rows = [dict(w.split("=", 1) for w in line.split()) for line in log.read_text().splitlines()]
    return [(row["pid"], int(row["epoch"])) for row in rows if "epoch" in row]


@pytest.mark.slow
def test_a_worker_killed_at_epoch_2_is_restarted_and_continues_from_last_ckpt(
    tmp_path: Path,
) -> None:
    exp = tmp_path / "exps" / "elastic_exp.py"
    exp.parent.mkdir()
    exp.write_text(KILLING_EXP)
    marker = tmp_path / "killed-once"
    metrics = {}
    for name, kill in (("plain", None), ("killed", marker)):
        logs = tmp_path / f"{name}-ranks"
        logs.mkdir()
        env = {**os.environ, "COLUMNS": "200", "MUSHIN_TEST_RANK_LOG": str(logs)}
        if kill is not None:
            env["KILL_ONCE"] = str(kill)
        args = [str(exp), "--gpus", "2", "--local", "--torchrun", "--max-restarts", "1"]
        proc = subprocess.run(
            [sys.executable, "-m", "mushin_box", "launch", *args]
            + ["--working-dir", str(tmp_path / name), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        cell = tmp_path / name / "cell"
        assert read_json(cell / "mushin_status.json")["status"] == "completed"
        metrics[name] = read_json(cell / "mushin_metrics.json")
        if kill is None:
            continue
        assert marker.exists()  # rank 1 was killed once
        epochs = _epochs(logs / "rank0.log")
        first, last = epochs[0][0], epochs[-1][0]
        assert first != last  # rank 0 ran in two attempts: torchrun restarted the group
        # the restarted attempt continued from last.ckpt (epoch 1's): it trained 2 and 3 only
        assert [e for pid, e in epochs if pid == last] == [2, 3], epochs
        status = read_json(cell / "mushin_status.json")
        assert status["attempt"] == 2, status
        # the restart is heard: which rank, where, from which epoch, how many are left
        host = socket.gethostname()
        # (the signal: from torchrun's agent, which reaped the killed worker)
        lost = {"rank": 1, "host": host, "ended": None, "signal": "SIGKILL", "epoch": 2}
        assert (status["restarts"], status["restarts_left"], status["restarted_after"]) == (
            1,
            0,
            lost,
        )
        assert (
            f"after 1 restart (rank 1 on {host} was killed by SIGKILL, restarted from epoch 2; "
            "0 left)" in proc.stdout
        ), proc.stdout
        # the duration sums both attempts; the last one's alone is beside it
        assert status["duration_s"] == pytest.approx(status["earlier_s"] + status["attempt_s"])
        assert status["earlier_s"] > 0
        run = read_json(cell / "mushin_provenance.json")["run"]
        assert run["launcher"]["kind"] == "torchrun"
        assert run["elastic"] == {"restarts": 1, "max_restarts": 1, "world_size": 2}
    print("restart test metrics:", metrics)
    assert metrics["killed"] == metrics["plain"]  # identical to the uninterrupted run's


@pytest.mark.slow
def test_cancel_stops_a_local_torchrun_cell_and_torchrun_does_not_restart_it(
    tmp_path: Path,
) -> None:
    """``cancel`` of a running local torchrun cell, from another process: the agent and its
    workers end (a restart budget left must not start the cell again), ``wait`` says how it
    ended, and the cell is recorded ``cancelled``."""
    import time

    root = tmp_path / "sweep"
    driver = subprocess.Popen(
        [sys.executable, "-m", "mushin_box", "launch", str(EXP), "--local", "--torchrun"]
        + ["--gpus", "2", "--max-restarts", "2", "--working-dir", str(root), "--no-progress"]
        + ["trainer.max_epochs=60", "+module.epoch_sleep_s=1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        box = [sys.executable, "-m", "mushin_box"]
        deadline = time.monotonic() + 180
        status: dict[str, object] = {}
        while (
            status.get("status") != "running" or not (root / "cell" / "fit_metrics.json").exists()
        ):
            assert time.monotonic() < deadline, f"the cell never started: {status}"
            assert driver.poll() is None, "the launch ended before the cell ran"
            time.sleep(0.5)
            status = read_json(root / "cell" / "mushin_status.json", default={}) or {}
        stop = subprocess.run(
            [*box, "cancel", str(root)], capture_output=True, text=True, timeout=120
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        driver.wait(timeout=120)  # the launch ends: nothing restarted the cell
        done = subprocess.run([*box, "wait", str(root), "--timeout", "30"], timeout=120)
        assert done.returncode == 1  # a cell was cancelled
        final = read_json(root / "cell" / "mushin_status.json")
        assert final["status"] == "cancelled", final
        assert final["attempt"] == status["attempt"]  # torchrun did not start it again
    finally:
        if driver.poll() is None:
            driver.kill()

# SPDX-License-Identifier: MIT
"""Operating a sweep on the real local SLURM cluster: a detached launch followed with
``status`` and ``logs`` from another "shell" (the sidecars only), one cell cancelled
mid-fit with ``mushin-box cancel`` while the other completes, ``wait``, and a resume that
runs only the cancelled cell again, from its ``last.ckpt``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import read_rank_logs

from mushin_box import SweepHandle, Workflow, multirun, submitit_slurm_config
from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _poll(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _status(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["status", str(root), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_detach_follow_cancel_wait_resume(
    tmp_path: Path, slurm_cluster: Any, rank_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ddp_helpers import fit_task, make_app_config

    root = tmp_path / "sweep"
    config = {
        **submitit_slurm_config(
            nodes=1, gpus_per_node=2, partition=slurm_cluster.partition, timeout_min=5
        ),
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
    }

    def run(**kwargs: Any) -> Any:
        return Workflow(fit_task, make_app_config(devices=2, max_epochs=6)).run(
            working_dir=root,
            launcher="mushin_slurm",
            launcher_config=config,
            on_error="nan",
            progress=False,
            **{"module.epoch_sleep_s": multirun([0.5, 3.0])},
            **kwargs,
        )

    t0 = time.monotonic()
    handle = run(wait=False)
    assert isinstance(handle, SweepHandle) and len(handle.job_ids) == 2
    assert time.monotonic() - t0 < 60  # submitted, not waited for
    fast, slow = root / "module.epoch_sleep_s=0.5", root / "module.epoch_sleep_s=3.0"

    # another shell: status from the sweep directory alone shows both cells running
    def both_running() -> bool:
        code, data = _status(root, capsys)
        return code == 3 and [c["state"] for c in data["cells"]] == ["running", "running"]

    _poll(both_running, 180, "both cells running")
    # rank 1's lines, from submitit's file for task 1 (listed in the cell's status)
    _poll(lambda: (slow / "checkpoints" / "last.ckpt").exists(), 180, "a checkpoint")
    capsys.readouterr()
    assert main(["logs", str(root), slow.name, "--rank", "1"]) == 0
    rank1 = capsys.readouterr().out
    assert "GLOBAL_RANK: 1" in rank1 and "GLOBAL_RANK: 0" not in rank1

    capsys.readouterr()
    assert main(["cancel", str(root), slow.name]) == 0
    assert f"{slow.name}: cancelled" in capsys.readouterr().out
    assert read_json(slow / "mushin_status.json")["status"] == "cancelled"

    capsys.readouterr()
    assert main(["wait", str(root), "--interval", "1", "--no-progress", "--timeout", "240"]) == 1
    out = capsys.readouterr()
    assert f"completed {fast.name}" in out.out and f"cancelled {slow.name}" in out.out
    assert "resume=True" in out.err and "mushin-box resume" not in out.err  # from Python
    code, data = _status(root, capsys)
    assert code == 1 and data["counts"] == {"completed": 1, "cancelled": 1}

    # resume: only the cancelled cell runs again, on both ranks, from its last.ckpt
    for f in rank_log.iterdir():
        f.unlink()
    ds = run(resume=True)
    assert ds["status"].values.tolist() == ["completed", "completed"]
    logs = read_rank_logs(rank_log)
    for rank in (0, 1):
        assert {r["job"] for r in logs[rank]} == {slow.name}
        assert int(logs[rank][0]["epoch"]) > 0, f"rank {rank} restarted at epoch 0"
    assert read_json(slow / "mushin_status.json")["attempt"] == 2
    assert main(["wait", str(root), "--interval", "1", "--no-progress"]) == 0
    assert SweepHandle(root).done()


def test_ctrl_c_on_a_slurm_launch_detaches_and_says_how_to_follow(
    tmp_path: Path, slurm_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C (SIGINT) while a blocking launch waits on SLURM: the jobs keep running, the
    launch prints the sweep directory first and, on the way out, how to reattach and cancel."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import REPO

    from mushin_box._slurm.jobs import is_live, job_states
    from mushin_box._slurm.submitted import job_ids, read_submission

    work = tmp_path / "sweep"
    argv = [
        sys.executable, "-m", "mushin_box", "launch", str(REPO / "examples" / "exp.py"),
        "--slurm", "--gpus", "1", "--partition", slurm_cluster.partition, "--time", "5",
        "--working-dir", str(work), "--no-progress", "trainer.max_epochs=100000",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        jobs = _poll(lambda: job_ids(read_submission(work)), 120, "the job to be submitted")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, out[-2000:] + err[-3000:]
        assert f"sweep: {work}" in out
        assert "detached: the SLURM jobs keep running" in err
        assert f"mushin-box wait {work}" in err and f"mushin-box cancel {work}" in err
        states = job_states(jobs)  # every job known to SLURM and live, not merely none dead
        assert set(states) == set(jobs) and all(map(is_live, states.values())), (jobs, states)
        capsys.readouterr()
        assert main(["cancel", str(work)]) == 0  # the whole sweep: its queued jobs too
        _poll(lambda: not any(is_live(s) for s in job_states(jobs).values()), 120, "scancel")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        subprocess.run(["scancel", *job_ids(read_submission(work))], check=False, timeout=30)

# SPDX-License-Identifier: MIT
"""On the real local cluster: a resume while the first job array is still queued submits
nothing, and ``cancel`` stops only jobs that squeue shows as the sweep's own (a foreign id
in ``mushin_jobs.json`` is left alone). Jobs are held (``--hold``): nothing runs, so both
tests are cheap."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mushin_box import SweepHandle, Workflow, multirun, submitit_slurm_config
from mushin_box._core.layout import JOBS_FILE
from mushin_box._core.sidecars import timestamp, write_json_atomic
from mushin_box._slurm.jobs import sweep_mark
from mushin_box._sweepdir.cancel import cancel
from mushin_box._sweepdir.manifest import SweepBusyError

pytestmark = pytest.mark.slurm


def _queue() -> dict[str, tuple[str, str]]:
    """Every job squeue shows: id -> (state, comment)."""
    out = subprocess.run(
        ["squeue", "-h", "-r", "-o", "%i|%T|%k"], capture_output=True, text=True, timeout=30
    ).stdout
    rows = [line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2]
    return {job: (state, comment) for job, state, comment in rows}


def _held_sweep(root: Path, tmp_path: Path, partition: str) -> Any:
    """``run(**kwargs)`` of a 2-cell sweep on SLURM whose jobs are held: queued until
    released, they never run, so the tests are cheap."""
    from workflow_tasks import marker_task

    config = {
        **submitit_slurm_config(nodes=1, gpus_per_node=1, partition=partition, timeout_min=2),
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
        "additional_parameters": {"hold": True},
    }

    def run(**kwargs: Any) -> Any:
        return Workflow(marker_task).run(
            working_dir=root,
            launcher="mushin_slurm",
            launcher_config=config,
            wait=False,
            x=multirun([1, 2]),
            markers=str(tmp_path / "markers"),
            **kwargs,
        )

    return run


def test_a_resume_while_the_first_array_is_queued_submits_nothing(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    root = (tmp_path / "sweep").resolve()
    run = _held_sweep(root, tmp_path, slurm_cluster.partition)

    first = run()
    assert isinstance(first, SweepHandle)
    jobs = set(first.job_ids)
    try:
        assert len(jobs) == 2
        queue = _queue()
        assert all(queue[j] == ("PENDING", sweep_mark(root)) for j in jobs)  # marked as ours
        before = (root / JOBS_FILE).read_bytes()
        with pytest.raises(SweepBusyError, match="still live") as refused:
            run(resume=True)
        assert all(j in str(refused.value) for j in jobs)
        assert (root / JOBS_FILE).read_bytes() == before
        mine = {j for j, (_, comment) in _queue().items() if comment == sweep_mark(root)}
        assert mine == jobs  # no second array
        report = cancel(root, timeout_s=30)  # queued, ours: cancelled
        assert set(report.scancelled) == jobs
    finally:
        subprocess.run(["scancel", "--", *jobs], check=False, timeout=30)


def test_cancel_leaves_a_foreign_job_alone(tmp_path: Path, slurm_cluster: Any) -> None:
    foreign = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    try:
        root = tmp_path / "sweep"
        write_json_atomic(
            root / "x=1" / "mushin_status.json", {"combo": {"x": 1}, "status": "pending"}
        )
        record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
        write_json_atomic(root / JOBS_FILE, {**record, "jobs": [{"job_id": foreign}]})
        report = cancel(root, timeout_s=10)
        assert report.scancelled == ()
        assert any(foreign in line and "not this sweep's" in line for line in report.refused)
        assert _queue()[foreign][0] == "PENDING"  # still there
    finally:
        subprocess.run(["scancel", "--", foreign], check=False, timeout=30)


def test_a_resume_refuses_a_marked_job_that_no_record_names(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    # a submission killed (kill -9) after sbatch queued its array, before it wrote the ids
    # to mushin_jobs.json: only the job's comment, the sweep's mark, still names it
    root = (tmp_path / "sweep").resolve()
    run = _held_sweep(root, tmp_path, slurm_cluster.partition)

    jobs = set(run().job_ids)
    try:
        (root / JOBS_FILE).unlink()  # the record the killed submission never wrote
        with pytest.raises(SweepBusyError, match="carry this sweep's mark") as refused:
            run(resume=True)
        assert all(j in str(refused.value) for j in jobs)
        assert f"scancel {min(jobs).partition('_')[0]}" in str(refused.value)
        mine = {j for j, (_, comment) in _queue().items() if comment == sweep_mark(root)}
        assert mine == jobs  # no second array
    finally:
        subprocess.run(["scancel", "--", *jobs], check=False, timeout=30)


def test_wait_returns_once_the_jobs_of_settled_cells_left_the_queue(
    tmp_path: Path, slurm_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # a cell completed while its job is still ending (its last files, its exit): a resume
    # run when `wait` returns would find the job live and refuse
    import threading

    from mushin_box.cli.main import main

    root = (tmp_path / "sweep").resolve()
    job = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true",
         f"--comment={sweep_mark(root)}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()  # fmt: skip
    stop = threading.Timer(3.0, subprocess.run, [["scancel", "--", job]], {"timeout": 30})
    try:
        done = {"combo": {"x": 1}, "cell": "x=1", "status": "completed", "slurm_job_id": job}
        write_json_atomic(root / "x=1" / "mushin_status.json", done)
        write_json_atomic(root / "x=1" / "mushin_metrics.json", {"y": 1.0})
        record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
        write_json_atomic(root / JOBS_FILE, {**record, "jobs": [{"job_id": job}]})
        stop.start()
        code = main(["wait", str(root), "--interval", "1", "--no-progress", "--timeout", "60"])
        assert code == 0, capsys.readouterr().err
        assert job not in _queue()  # not before the job left the queue
    finally:
        stop.cancel()
        subprocess.run(["scancel", "--", job], check=False, timeout=30)

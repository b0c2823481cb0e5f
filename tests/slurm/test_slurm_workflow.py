# SPDX-License-Identifier: MIT
"""Workflow.run on the real local SLURM cluster with the stock `submitit_slurm` launcher:
CPU ranks (gloo), one SLURM task per (fake) GPU, Trainer devices/num_nodes matching."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import read_rank_logs

from mushin_box import Workflow, multirun, submitit_slurm_config
from mushin_box._core.sidecars import read_json

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _run(
    tmp_path: Path,
    cluster: Any,
    *,
    nodes: int,
    overrides: list[str] | None = None,
    on_error: str = "raise",
    resume: bool = False,
    **sweep: Any,
) -> Any:
    from ddp_helpers import fit_task, make_app_config

    slurm = submitit_slurm_config(
        nodes=nodes, gpus_per_node=2, partition=cluster.partition, timeout_min=5
    )
    return Workflow(fit_task, make_app_config(devices=2, max_epochs=2)).run(
        working_dir=tmp_path / "sweep",
        launcher="submitit_slurm",
        launcher_config=slurm,
        overrides=[f"trainer.num_nodes={nodes}", *(overrides or [])],
        on_error=on_error,  # type: ignore[arg-type]
        resume=resume,
        progress=False,
        **sweep,
    )


def _fit_metrics_per_cell(root: Path) -> dict[str, int]:
    return {
        d.name: len(list(d.rglob("fit_metrics.pt")))
        for d in root.iterdir()
        if d.is_dir() and (d / "mushin_status.json").exists()
    }


@pytest.mark.floor
def test_two_cells_one_node_two_tasks(tmp_path: Path, slurm_cluster: Any, rank_log: Path) -> None:
    ds = _run(tmp_path, slurm_cluster, nodes=1, seed=multirun([1, 2]))
    assert ds["status"].values.tolist() == ["completed", "completed"]
    assert _fit_metrics_per_cell(tmp_path / "sweep") == {"seed=1": 1, "seed=2": 1}
    assert ds["fit.val_loss"].dims == ("seed", "epoch") and bool(ds["fit.val_loss"].notnull().all())
    assert ds["world_size"].values.tolist() == [2, 2]
    logs = read_rank_logs(rank_log)
    assert sorted(logs) == [0, 1]
    # rank r of the cell with seed s was seeded s + r
    assert {(r["job"], r["seed"]) for r in logs[1]} == {("seed=1", "2"), ("seed=2", "3")}


def test_two_nodes_world_size_four(tmp_path: Path, slurm_cluster: Any, rank_log: Path) -> None:
    if len(slurm_cluster.nodes) < 2:
        pytest.skip("the local cluster has one node")
    ds = _run(tmp_path, slurm_cluster, nodes=2, seed=multirun([5]))
    assert ds["world_size"].values.tolist() == [4]
    assert _fit_metrics_per_cell(tmp_path / "sweep") == {"seed=5": 1}
    assert sorted(read_rank_logs(rank_log)) == [0, 1, 2, 3]


def test_mismatched_tasks_per_node_fails_fast(tmp_path: Path, slurm_cluster: Any) -> None:
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        _run(
            tmp_path,
            slurm_cluster,
            nodes=1,
            overrides=["hydra.launcher.tasks_per_node=1"],
            seed=multirun([1]),
        )
    assert "DDP world size mismatch" in str(info.value)
    assert time.monotonic() - start < 120
    status = read_json(tmp_path / "sweep" / "seed=1" / "mushin_status.json")
    assert status["status"] == "failed" and "world size mismatch" in status["error"]["message"]


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _release(job: str) -> bool:
    state = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    if state != "PENDING":
        return False
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], timeout=30)
    return True


def _running_job_with_ckpt(cell: Path) -> str | None:
    status = read_json(cell / "mushin_status.json", default={}) or {}
    if status.get("status") == "running" and (cell / "checkpoints" / "last.ckpt").exists():
        return status.get("slurm_job_id")
    return None


def test_scancel_and_requeue_mid_fit_then_resume(
    tmp_path: Path, slurm_cluster: Any, rank_log: Path
) -> None:
    """Three cells: one finishes, one is scancel'led and one requeued mid-fit. The requeued
    job resumes by itself from last.ckpt; re-running with resume=True reuses the finished
    cells and continues the cancelled one from its last.ckpt (epoch > 0)."""
    root = tmp_path / "sweep"
    sweep = {"module.epoch_sleep_s": multirun([0.0, 2.0, 2.01])}
    common = {"overrides": ["trainer.max_epochs=6"], "on_error": "nan"}
    outcome: dict[str, Any] = {}

    def first_run() -> None:
        try:
            outcome["ds"] = _run(tmp_path, slurm_cluster, nodes=1, **common, **sweep)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            outcome["error"] = exc

    driver = threading.Thread(target=first_run)
    driver.start()
    cancelled = root / "module.epoch_sleep_s=2.0"
    requeued = root / "module.epoch_sleep_s=2.01"
    job_a = _wait_for(lambda: _running_job_with_ckpt(cancelled), 180, "a checkpoint of cell A")
    subprocess.run(["scancel", job_a], check=True, timeout=30)
    job_b = _wait_for(lambda: _running_job_with_ckpt(requeued), 180, "a checkpoint of cell B")
    subprocess.run(["scontrol", "requeue", job_b], check=True, timeout=30)
    # SLURM holds a requeued job back (BeginTime ~2 min ahead); release it at once
    _wait_for(lambda: _release(job_b), 60, "the requeued job to be pending")
    driver.join(timeout=300)
    assert not driver.is_alive()
    # the requeued job ran again by itself, from its checkpoint, and completed
    _wait_for(
        lambda: (read_json(requeued / "mushin_status.json") or {}).get("status") == "completed",
        240,
        "the requeued cell to complete",
    )
    assert read_json(requeued / "mushin_status.json")["attempt"] == 2
    assert read_json(cancelled / "mushin_status.json")["status"] == "failed"

    for f in rank_log.iterdir():
        f.unlink()
    ds = _run(tmp_path, slurm_cluster, nodes=1, resume=True, **common, **sweep)
    assert ds["status"].values.tolist() == ["completed"] * 3
    assert read_json(cancelled / "mushin_status.json")["attempt"] == 2
    logs = read_rank_logs(rank_log)
    # only the cancelled cell ran again, on both ranks, starting after epoch 0
    for rank in (0, 1):
        jobs = {r["job"] for r in logs[rank]}
        assert jobs == {cancelled.name}, jobs
        first_epoch = int(logs[rank][0]["epoch"])
        assert first_epoch > 0, f"rank {rank} restarted at epoch 0"
    assert ds["fit.val_loss"].sizes["epoch"] == 6

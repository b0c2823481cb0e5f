# SPDX-License-Identifier: MIT
"""The local SLURM cluster (scripts/local-slurm) and real submitit jobs on it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _slurm_cluster import SlurmCluster

from mushin_box._slurm.config import submitit_slurm_config

pytestmark = pytest.mark.slurm

JOB_TIMEOUT_S = 120.0

# BaseQueueConf keys go to submitit unprefixed, the rest as slurm_<key> (as the launcher does)
_GENERIC_KEYS = {
    "nodes",
    "tasks_per_node",
    "gpus_per_node",
    "cpus_per_task",
    "timeout_min",
    "mem_gb",
    "name",
    "stderr_to_stdout",
}
_TASK_ENV = (
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURMD_NODENAME",
    "SLURM_GPUS_ON_NODE",
    "CUDA_VISIBLE_DEVICES",
)


def task_env() -> dict[str, str]:
    """Runs inside every SLURM task: what that task was told about itself."""
    return {name: os.environ.get(name, "<unset>") for name in _TASK_ENV}


def sleep_then_return(seconds: float) -> str:
    time.sleep(seconds)
    return "finished"


def _query(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=15, check=True).stdout


def _executor(folder: Path, config: dict[str, Any]) -> Any:
    import submitit

    executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm")
    executor.update_parameters(
        **{key if key in _GENERIC_KEYS else f"slurm_{key}": value for key, value in config.items()}
    )
    return executor


def _wait_for_results(job: Any, num_tasks: int, timeout_s: float = JOB_TIMEOUT_S) -> list[Any]:
    """job.results(), but cancel the job and fail the test after timeout_s."""
    deadline = time.monotonic() + timeout_s
    tasks = [job.task(i) for i in range(num_tasks)]
    while not all(task.done() for task in tasks):
        if time.monotonic() > deadline:
            job.cancel(check=False)
            pytest.fail(
                f"SLURM job {job.job_id} not done after {timeout_s:.0f}s (state {job.state}); "
                f"cancelled it. Logs: {job.paths.stdout.parent}"
            )
        time.sleep(0.25)
    return job.results()


def _wait_for_state(job: Any, states: set[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while job.state not in states:
        if time.monotonic() > deadline:
            job.cancel(check=False)
            pytest.fail(f"SLURM job {job.job_id} is {job.state} after {timeout_s:.0f}s")
        time.sleep(0.25)


def test_idle_nodes_with_gpus(slurm_cluster: SlurmCluster) -> None:
    count = len(slurm_cluster.nodes)
    assert slurm_cluster.nodes == tuple(f"slurmnode{i}" for i in range(1, count + 1))
    assert count >= 2
    assert slurm_cluster.gpus_per_node >= 2
    assert os.environ["SLURM_CONF"] == str(slurm_cluster.conf)
    deadline = time.monotonic() + 30  # a job of an earlier test may still be completing
    while True:
        rows = _query("sinfo", "-h", "-N", "-p", slurm_cluster.partition, "-o", "%N %T %G")
        states = {node: (state, gres) for node, state, gres in map(str.split, rows.splitlines())}
        if all(state == "idle" for state, _ in states.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert states == {
        node: ("idle", f"gpu:{slurm_cluster.gpus_per_node}") for node in slurm_cluster.nodes
    }


def test_node_names_expand_and_resolve(slurm_cluster: SlurmCluster) -> None:
    hostnames = _query("scontrol", "show", "hostnames", "slurmnode[1-2]").split()
    assert hostnames == ["slurmnode1", "slurmnode2"]
    # Lightning's SLURMEnvironment uses the first node name as MASTER_ADDR
    assert {socket.gethostbyname(name) for name in hostnames} == {"127.0.0.1"}


def test_submitit_one_node_two_gpus(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    config = submitit_slurm_config(
        nodes=1, gpus_per_node=2, partition=slurm_cluster.partition, timeout_min=5
    )
    job = _executor(tmp_path, {**config, "name": "mushin-1x2"}).submit(task_env)
    results = _wait_for_results(job, num_tasks=2)

    sbatch = job.paths.submission_file.read_text()
    assert "--gpus-per-node=2" in sbatch and "--ntasks-per-node=2" in sbatch
    assert sorted(r["SLURM_PROCID"] for r in results) == ["0", "1"]
    assert sorted(r["SLURM_LOCALID"] for r in results) == ["0", "1"]
    assert {r["SLURM_NTASKS"] for r in results} == {"2"}
    assert {r["SLURM_GPUS_ON_NODE"] for r in results} == {"2"}
    assert {r["CUDA_VISIBLE_DEVICES"] for r in results} == {"0,1"}
    assert len({r["SLURMD_NODENAME"] for r in results}) == 1


def test_submitit_two_nodes_world_size_four(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    config = submitit_slurm_config(
        nodes=2, gpus_per_node=2, partition=slurm_cluster.partition, timeout_min=5
    )
    job = _executor(tmp_path, {**config, "name": "mushin-2x2"}).submit(task_env)
    results = _wait_for_results(job, num_tasks=4)

    assert sorted(r["SLURM_PROCID"] for r in results) == ["0", "1", "2", "3"]
    assert {r["SLURM_NTASKS"] for r in results} == {"4"}
    # every task of a node sees that node's two GPUs (which two depends on what the
    # node's earlier jobs left allocated: 0,1 on an idle node)
    gpus: dict[str, set[str]] = {}
    for r in results:
        gpus.setdefault(r["SLURMD_NODENAME"], set()).add(r["CUDA_VISIBLE_DEVICES"])
    assert [len(seen) for seen in gpus.values()] == [1, 1]
    assert all(len(set(next(iter(seen)).split(","))) == 2 for seen in gpus.values())
    by_rank = {int(r["SLURM_PROCID"]): r for r in results}
    assert [by_rank[rank]["SLURM_NODEID"] for rank in range(4)] == ["0", "0", "1", "1"]
    assert [by_rank[rank]["SLURM_LOCALID"] for rank in range(4)] == ["0", "1", "0", "1"]
    names = {r["SLURMD_NODENAME"] for r in results}
    assert len(names) == 2 and names <= set(slurm_cluster.nodes)


def test_cancelled_job_is_seen_as_done(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Needs accounting (slurmdbd): without sacct, submitit never sees a cancelled job end."""
    config = submitit_slurm_config(
        nodes=1, gpus_per_node=1, partition=slurm_cluster.partition, timeout_min=5
    )
    job = _executor(tmp_path, {**config, "name": "mushin-cancel"}).submit(sleep_then_return, 300)
    _wait_for_state(job, {"RUNNING"}, timeout_s=60)
    job.cancel()
    deadline = time.monotonic() + 30
    while not job.done():
        assert time.monotonic() < deadline, f"cancelled job {job.job_id} never done: {job.state}"
        time.sleep(0.25)
    assert job.state.startswith("CANCELLED")

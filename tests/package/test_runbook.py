# SPDX-License-Identifier: MIT
"""scripts/runbook: the seed's runbook steps 1-5 against a SLURM cluster; step 4 both through
Workflow.run and as the seed writes it (--multirun, hydra/launcher=submitit_slurm), and step
5 loads both. ``--cluster`` is the real-cluster mode: nothing local is started, the work
directory is the user's (shared) one, and no answering controller stops it at once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

RUNBOOK = REPO / "scripts" / "runbook"


def _runbook(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
    env = {**os.environ, **(env or {})}
    return subprocess.run(
        ["bash", str(RUNBOOK), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def _no_local_cluster_started(proc: Any) -> bool:
    return "[local-slurm" not in proc.stderr and "[local-slurm" not in proc.stdout


def test_cluster_mode_without_a_workdir_stops_before_anything_starts() -> None:
    proc = _runbook("--cluster", "--partition", "gpu")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "runbook: error: --cluster needs --workdir DIR on storage every compute node sees "
        "(e.g. --workdir /scratch/$USER/runbook)"
    ]
    assert _no_local_cluster_started(proc) and "PASS" not in proc.stdout


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_client")  # a real scontrol
def test_cluster_mode_with_no_controller_answering_names_the_fix(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"  # a controller nobody listens for (port 9: discard)
    conf.write_text("ClusterName=down\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n")
    work = tmp_path / "shared"
    proc = _runbook("--cluster", "--workdir", str(work), env={"SLURM_CONF": str(conf)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("runbook: error: no SLURM controller answers (scontrol ping: ")
    assert line.endswith("drop --cluster to use the local test cluster")
    assert _no_local_cluster_started(proc) and not work.exists()


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(600)  # the runbook's own bound (below); ~3 min on an idle 2-core machine
def test_runbook_passes_every_check_in_cluster_mode(tmp_path: Path, slurm_cluster: Any) -> None:
    # --cluster against the running local cluster, as on a login node: the runbook starts
    # nothing, and writes only under the --workdir it is given
    work = tmp_path / "shared" / "runbook"
    proc = _runbook(
        "--cluster",
        "--workdir",
        str(work),
        "--partition",
        slurm_cluster.partition,
        "--accelerator",
        "cpu",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _no_local_cluster_started(proc)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert len(lines) == 9 and all(line.startswith("PASS") for line in lines), lines
    assert any("--multirun hydra/launcher=submitit_slurm" in line for line in lines), lines
    assert "runbook: 9 passed, 0 failed" in proc.stdout
    assert f"work dir {work}" in proc.stdout and {p.name for p in work.iterdir()} >= {
        "sweep",
        "raw",
    }
    # the local cluster's "nodes" share /tmp, a real cluster's don't: said, not refused
    assert "is under /tmp, which is node-local on most clusters" in proc.stderr

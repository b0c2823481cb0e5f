# SPDX-License-Identifier: MIT
"""A dry run and a launch ask the cluster first (``sbatch --test-only``, ``sinfo``): a
partition the cluster lacks, or one node more than the cluster has, is exit 2 with SLURM's
reason, nothing submitted and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

pytestmark = [pytest.mark.slurm]

EXP = str(REPO / "examples" / "exp.py")


def _launch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", EXP, "--time", "5", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def _my_jobs(name: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True, text=True, timeout=60
    ).stdout.strip()


#: a shape the cluster cannot hold (one node or one GPU more than it has), and SLURM's reason
SHAPES = {
    "partition": lambda c: (
        ["--partition", "no_such_partition_xyz"],
        "invalid partition specified",
    ),
    "nodes": lambda c: (
        ["--nodes", str(len(c.nodes) + 1), "--gpus", "1"],
        f"partition {c.partition} has {len(c.nodes)} node(s)",
    ),
    "gpus": lambda c: (["--gpus", str(c.gpus_per_node + 1)], f"at most {c.gpus_per_node} GPU(s)"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "launch"])
def test_a_shape_the_cluster_refuses_is_exit_2_with_slurms_reason(
    slurm_cluster: Any, tmp_path: Path, shape: str, dry: bool
) -> None:
    flags, reason = SHAPES[shape](slurm_cluster)
    work = tmp_path / "sweep"
    name = f"ask-{tmp_path.name}"[:60]
    extra = ["--dry-run"] if dry else ["--detach"]
    proc = _launch(*flags, "--job-name", name, "--working-dir", str(work), *extra, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mushin-box launch: error: "), proc.stderr
    assert reason in line and "nothing was submitted" in line, line
    assert not work.exists()  # nothing written
    assert _my_jobs(name) == ""  # nothing submitted


def test_a_shape_that_fits_passes_the_check(slurm_cluster: Any, tmp_path: Path) -> None:
    proc = _launch("--nodes", "2", "--gpus", "4", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the review says the cluster was asked, and what it answered (issue 43, item 6): a
    # passed check and a skipped one must not look the same
    row = next(line for line in proc.stdout.splitlines() if line.startswith("  cluster "))
    assert row.split(None, 1)[1].startswith("sbatch --test-only: accepted: "), row
    assert "to start at" in row, row
    data = _launch("--nodes", "2", "--gpus", "4", "--dry-run", "--json", cwd=tmp_path)
    check = json.loads(data.stdout)["cluster_check"]
    assert check["accepted"] is True and "to start at" in check["said"], check


def test_a_dry_run_here_asks_no_cluster(slurm_cluster: Any, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", EXP, "--local", "--dry-run", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cluster_check" not in json.loads(proc.stdout)

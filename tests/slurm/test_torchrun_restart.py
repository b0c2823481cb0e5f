# SPDX-License-Identifier: MIT
"""torchrun's restarts inside one SLURM job, on the local cluster: ``launch --torchrun
--slurm --nodes 2 --gpus 1 --max-restarts 1``, and rank 1 (on the job's second node) is
SIGKILLed once as epoch 2 starts. Its node's torchrun agent stops the group, both agents
meet again (rendezvous round 2) and the restarted workers continue from ``last.ckpt``. The
launcher must not take rank 0's failed first attempt for the cell's result while the job
still runs: the cell completes, on attempt 2, with the uninterrupted run's metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from killing_exp import KILLING_EXP

from mushin_box._core.sidecars import read_json

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _box(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "COLUMNS": "200"},
    )


def _epochs(log: Path) -> list[tuple[str, int]]:
    """(pid, epoch) of every epoch a rank started (MUSHIN_TEST_RANK_LOG), in order."""
    rows = [dict(w.split("=", 1) for w in line.split()) for line in log.read_text().splitlines()]
    return [(row["pid"], int(row["epoch"])) for row in rows if "epoch" in row]


def test_a_worker_killed_at_epoch_2_on_slurm_restarts_the_group_from_last_ckpt(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    exp = tmp_path / "exps" / "elastic_exp.py"
    exp.parent.mkdir()
    exp.write_text(KILLING_EXP)
    # the uninterrupted reference: the same 2-rank experiment, run here (HydraDDP)
    plain = tmp_path / "plain"
    ref = _box("launch", str(exp), "--local", "--gpus", "2", "--working-dir", str(plain),
               "--no-progress", env=dict(os.environ))  # fmt: skip
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-3000:]

    marker, logs, root = tmp_path / "killed-once", tmp_path / "ranks", tmp_path / "killed"
    logs.mkdir()
    env = {**os.environ, "KILL_ONCE": str(marker), "MUSHIN_TEST_RANK_LOG": str(logs)}
    run = _box(
        *("launch", str(exp), "--torchrun", "--slurm", "--nodes", "2", "--gpus", "1"),
        *("--max-restarts", "1", "--partition", slurm_cluster.partition, "--time", "5"),
        *("--working-dir", str(root), "--no-progress"),
        env=env,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert marker.exists()  # rank 1 was killed once
    cell = root / "cell"
    status = read_json(cell / "mushin_status.json")
    assert status["status"] == "completed" and status["attempt"] == 2, status
    epochs = _epochs(logs / "rank0.log")
    first, last = epochs[0][0], epochs[-1][0]
    assert first != last  # rank 0 ran in two attempts: torchrun restarted the group
    # the restarted attempt continued from last.ckpt (epoch 1's): it trained 2 and 3 only
    assert [e for pid, e in epochs if pid == last] == [2, 3], epochs
    prov = read_json(cell / "mushin_provenance.json")["run"]
    assert prov["launcher"]["kind"] == "torchrun"
    assert prov["elastic"]["restarts"] == 1 and prov["elastic"]["max_restarts"] == 1
    assert [a["world_size"] for a in prov["attempts"]] == [2, 2], prov["attempts"]
    assert "world_changes" not in prov or not prov["world_changes"]
    metrics = read_json(cell / "mushin_metrics.json")
    print("SLURM restart test metrics:", metrics)
    assert metrics == read_json(plain / "cell" / "mushin_metrics.json")

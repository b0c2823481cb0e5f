# SPDX-License-Identifier: MIT
"""``mushin-box launch EXP --torchrun --gpus G``: each cell's ranks as ``torchrun
--standalone`` workers here (CPU ranks, gloo), recorded as torchrun, the same experiment as
a HydraDDP run of it (``diff`` exits 0); and its usage errors (exit 2, one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

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
        (["--torchrun", "--slurm"], "SLURM torchrun is not supported yet"),
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
    runs = {"torchrun": ["--torchrun"], "hydraddp": []}
    for name, extra in runs.items():
        proc = launch(
            str(EXP),
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

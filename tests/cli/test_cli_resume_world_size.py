# SPDX-License-Identifier: MIT
"""A cell checkpointed at world size 2 goes on at world size 1 (issue 30, items 2 and 3).

Two torchrun workers fit until rank 1 dies when epoch 2 starts; torchrun restarts the group
once, the restart continues from ``last.ckpt`` and dies at epoch 2 again, and the launch
fails. ``launch --resume --gpus 1`` then continues the cell from epoch 1's ``last.ckpt`` on
one rank. With world-size-invariant batches its metrics equal those of an uninterrupted
2-rank run within 1e-6; the record lists every attempt (restart count, world size, the
epoch its fit started at) and names the change of world and its epoch; ``diff`` calls the
two the same experiment.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from killing_exp import KILLING_EXP

from mushin_box._core.sidecars import read_json


def _box(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def _epochs(log: Path) -> list[int]:
    """The epochs rank 0 started (MUSHIN_TEST_RANK_LOG), in order."""
    rows = [dict(w.split("=", 1) for w in line.split()) for line in log.read_text().splitlines()]
    return [int(row["epoch"]) for row in rows if "epoch" in row]


@pytest.mark.slow
def test_a_2_worker_cell_stopped_at_epoch_2_resumes_on_1_worker_with_the_same_metrics(
    tmp_path: Path,
) -> None:
    exp = tmp_path / "exps" / "world_exp.py"
    exp.parent.mkdir()
    exp.write_text(KILLING_EXP)
    plain, stopped = tmp_path / "plain", tmp_path / "stopped"
    logs = tmp_path / "ranks"
    logs.mkdir()

    run = _box("launch", str(exp), "--local", "--gpus", "2", "--working-dir", str(plain))
    assert run.returncode == 0, run.stderr[-3000:]

    first = _box(
        *("launch", str(exp), "--local", "--torchrun", "--gpus", "2", "--max-restarts", "1"),
        *("--working-dir", str(stopped), "--no-progress"),
        env={"KILL_AT_2": "1", "MUSHIN_TEST_RANK_LOG": str(logs)},
    )
    assert first.returncode != 0  # both attempts died at epoch 2: torchrun gave up
    cell = stopped / "cell"
    assert read_json(cell / "mushin_status.json")["status"] != "completed"

    again = _box(
        *("launch", str(exp), "--local", "--gpus", "1", "--resume"),
        *("--working-dir", str(stopped), "--no-progress"),
        env={"MUSHIN_TEST_RANK_LOG": str(logs)},
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert read_json(cell / "mushin_status.json")["status"] == "completed"
    # attempt 1 trained 0-1 and died at 2, the restart (from last.ckpt) died at 2 too, and
    # the resume on one rank continued from last.ckpt: it trained 2-3 only
    assert _epochs(logs / "rank0.log") == [0, 1, 2, 2, 2, 3]

    want, got = (
        read_json(plain / "cell" / "mushin_metrics.json"),
        read_json(cell / "mushin_metrics.json"),
    )
    print("uninterrupted:", want, "resumed at world size 1:", got)
    assert set(got) == set(want) and want
    for name, value in want.items():
        assert math.isclose(got[name], value, rel_tol=0, abs_tol=1e-6), (name, got, want)

    run_record = read_json(cell / "mushin_provenance.json")["run"]
    assert run_record["topology"]["world_size"] == 1
    assert run_record["world_changes"] == [{"epoch": 2, "from": 2, "to": 1}]
    attempts = run_record["attempts"]
    assert [(a["attempt"], a["restart"], a["world_size"], a["epoch"]) for a in attempts] == [
        (1, 0, 2, 0),
        (2, 1, 2, 2),  # its start is in no checkpoint: dated when attempt 3 began
        (3, 0, 1, 2),
    ]
    assert [a["launcher"] for a in attempts][:2] == ["torchrun", "torchrun"]

    # the same experiment with the same results (to 1e-6): the change of world is a run fact
    diff = _box("diff", str(plain / "cell"), str(cell), "--atol", "1e-6", "--json")
    assert diff.returncode == 0, diff.stdout[-3000:]
    assert json.loads(diff.stdout)["verdict"] == "same experiment, same results"
    exact = _box("diff", str(plain / "cell"), str(cell))
    assert exact.returncode in (0, 1), exact.stderr
    assert "data order differs" not in exact.stdout  # a rank's batch at another world size

# SPDX-License-Identifier: MIT
"""A pending cell's job id and squeue's reason, for every cell of a sweep from ONE squeue
call (a 500-cell sweep must not run 500 commands), with the reasons under which a job
never starts marked."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mushin_box._core.sidecars import timestamp, write_json_atomic
from mushin_box._sweepdir.board import read_sweep

# squeue/sacct stand-ins: log argv, print "id|STATE|reason" for -j ids found in queue.json
# (an array's id: each of its tasks, as squeue -r prints them)
_TOOL = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "calls.jsonl"), "a") as log:
        log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
    queue = json.load(open(os.path.join(here, "queue.json")))
    if os.path.basename(sys.argv[0]) == "squeue" and "-j" in sys.argv:
        asked = sys.argv[sys.argv.index("-j") + 1].split(",")
        for job in [j for j in queue if j in asked or j.split("_")[0] in asked]:
            print(f"{{job}}|{{queue[job]}}")
    """
)
_QUEUE = {
    "9_0": "PENDING|JobHeldUser",
    "9_1": "PENDING|QOSMaxGRESPerJob",
    "9_2": "PENDING|ReqNodeNotAvail, UnavailableNodes:gpu[3-4]",
    "9_3": "RUNNING|None",
}


@pytest.fixture
def queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("squeue", "sacct"):
        (folder / name).write_text(_TOOL.format(python=sys.executable))
        (folder / name).chmod(0o755)
    (folder / "queue.json").write_text(json.dumps(_QUEUE))
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    return folder


def test_each_pending_cell_has_its_job_and_reason_from_one_squeue_call(
    tmp_path: Path, queue: Path
) -> None:
    root = tmp_path / "sweep"
    grid = {"x": [0, 1, 2, 3]}
    write_json_atomic(root / "mushin_sweep.json", {"grid": grid, "params": ["x"], "cells": {}})
    jobs = [{"job_id": f"9_{x}", "overrides": [f"x={x}"]} for x in range(4)]
    record = {"schema": 1, "cluster": "slurm", "host": "login1", "submitted": timestamp()}
    write_json_atomic(root / "mushin_jobs.json", {**record, "detached": True, "jobs": jobs})

    cells = {c.combo["x"]: c for c in read_sweep(root).cells}
    assert [cells[x].job_id for x in range(4)] == ["9_0", "9_1", "9_2", "9_3"]
    assert all(c.state == "pending" for c in cells.values())
    assert (cells[0].reason, cells[0].never_starts) == ("JobHeldUser", False)
    assert (cells[1].reason, cells[1].never_starts) == ("QOSMaxGRESPerJob", True)
    assert cells[2].never_starts and (cells[2].reason or "").startswith("ReqNodeNotAvail")
    # its job runs, the cell has not written its status yet: no reason, not "None"
    assert cells[3].reason == "SLURM job 9_3 is RUNNING" and not cells[3].never_starts

    calls = [json.loads(line) for line in (queue / "calls.jsonl").read_text().splitlines()]
    squeue = [c for c in calls if c[0] == "squeue"]
    assert len(squeue) == 1 and squeue[0][-1] == "%i|%T|%r"


def _detached(root: Path, grid: dict[str, list[Any]], jobs: list[dict[str, Any]]) -> None:
    write_json_atomic(root / "mushin_sweep.json", {"grid": grid, "params": list(grid), "cells": {}})
    record = {"schema": 1, "cluster": "slurm", "host": "login1", "submitted": timestamp()}
    write_json_atomic(root / "mushin_jobs.json", {**record, "detached": True, "jobs": jobs})


def test_a_pending_cell_finds_its_job_however_its_overrides_spell_the_values(
    tmp_path: Path, queue: Path
) -> None:
    root = tmp_path / "sweep"
    jobs = [
        {"job_id": "9_0", "overrides": "x=0 opt=adam"},  # not a list: runs no cell it names
        {"job_id": "9_1", "overrides": ["x=0", "opt=adam", "+tag=b"]},
        {"job_id": "9_2", "overrides": ["x=0", "opt='sgd'"]},
        {"job_id": "9_3", "overrides": ["x=1", 'opt="sgd"']},
    ]
    _detached(root, {"x": [0, 1], "opt": ["adam", "sgd"]}, jobs)
    cells = {(c.combo["x"], c.combo["opt"]): c for c in read_sweep(root).cells}
    assert cells[0, "adam"].job_id == "9_1"
    assert cells[0, "sgd"].job_id == "9_2"
    assert cells[1, "sgd"].job_id == "9_3"
    assert cells[1, "adam"].job_id is None  # no job sets its values
    assert cells[1, "adam"].reason == "a job of the latest submission is queued"


def test_the_first_job_of_the_submission_that_sets_a_cells_values_is_its_job(
    tmp_path: Path, queue: Path
) -> None:
    root = tmp_path / "sweep"
    jobs = [{"job_id": f"9_{i}", "overrides": ["x=1"]} for i in (2, 0, 1)]
    _detached(root, {"x": [1]}, jobs)
    assert [c.job_id for c in read_sweep(root).cells] == ["9_2"]


def test_pending_cells_are_matched_to_jobs_in_one_pass_over_the_jobs(
    tmp_path: Path, queue: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detached launch of N cells records N jobs: each cell's values are spelled once,
    not once per job (at 10,000 cells, 28 million checks: a minute of `status`)."""
    import mushin_box._core.overrides as overrides

    root = tmp_path / "sweep"
    n = 300
    _detached(
        root,
        {"x": list(range(n))},
        [{"job_id": f"9_{x}", "overrides": [f"x={x}"]} for x in range(n)],
    )
    (queue / "queue.json").write_text(json.dumps({f"9_{x}": "PENDING|Priority" for x in range(n)}))
    spelled = []
    real = overrides.format_value
    monkeypatch.setattr(overrides, "format_value", lambda v: spelled.append(v) or real(v))

    cells = read_sweep(root).cells
    assert [c.job_id for c in cells] == [f"9_{x}" for x in range(n)]
    assert all(c.reason == "Priority" for c in cells)
    assert len(spelled) <= 2 * n

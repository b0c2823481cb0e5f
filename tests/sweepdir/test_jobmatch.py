# SPDX-License-Identifier: MIT
"""Whether a job of a submission may run a cell of a grid, decided per job from its
overrides (``grid_runs``), is what a scan of every cell says (``job_runs_cell``): a resume
of a 10,000-cell SLURM sweep with live jobs used to scan 10,000 cells for each job."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mushin_box._core.layout import JOBS_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._sweep import workflow
from mushin_box._sweepdir.board import grid_runs, job_runs_cell, spellings
from mushin_box._sweepdir.manifest import SweepBusyError

KEYS = ["x", "lr", "tag"]
VALUES = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.1, 1.0, -0.0, 1e-3]),
    st.sampled_from(["a", "adam", "b c", "1", "???"]),  # "???": no override spelling
    st.booleans(),
    st.none(),
)
GRIDS = st.dictionaries(
    st.sampled_from(KEYS), st.lists(VALUES, min_size=0, max_size=3, unique_by=repr), max_size=3
)
EXAMPLES = int(os.environ.get("MUSHIN_HYPOTHESIS_EXAMPLES", "300"))


def _texts(grid: dict[str, list[Any]]) -> st.SearchStrategy[str]:
    spelled = sorted({t for vs in grid.values() for v in vs for t in spellings(v)})
    return st.sampled_from([*spelled, "9", "zz", "'???'", ""])


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, list[Any]], Any]:
    grid = draw(GRIDS)
    item = st.one_of(
        st.builds(lambda k, v, p: f"{p}{k}={v}", st.sampled_from([*KEYS, "seed"]),
                  _texts(grid), st.sampled_from(["", "+", "~"])),
        st.sampled_from(["x", "lr"]),  # no "=": a key set to nothing
    )  # fmt: skip
    overrides = draw(st.one_of(st.lists(item, max_size=4), st.none(), st.just(["x=1", 3])))
    return grid, overrides


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
# a key with a value that has no spelling says yes once the keys before it matched
@example(({"x": ["???"], "lr": [1]}, ["x=zz", "lr=9"]))  # True: x decides first
@example(({"lr": [1], "x": ["???"]}, ["x=zz", "lr=9"]))  # False: lr decides first
@example(({"x": [1], "tag": []}, ["x=1"]))  # no cell at all
def test_a_job_runs_a_cell_of_the_grid_exactly_when_the_scan_says_so(case: Any) -> None:
    grid, overrides = case
    cells = [dict(zip(grid, c, strict=True)) for c in itertools.product(*grid.values())]
    assert grid_runs(grid)(overrides) == any(job_runs_cell(overrides, c) for c in cells)


def test_a_resume_tells_which_of_10000_live_jobs_run_its_cells() -> None:
    grid = {"a": list(range(100)), "b": list(range(100))}
    jobs = [
        {"job_id": f"7_{i}", "overrides": [f"a={i % 100}", f"b={i // 100}"]} for i in range(10000)
    ]
    jobs.append({"job_id": "8", "overrides": ["a=100"]})  # a cell of another grid
    jobs.append({"job_id": "9", "overrides": "a=1"})  # not a list: it may run any cell
    job_runs = grid_runs(grid)  # as the sweep's driver asks it of each live job
    runs = {job["job_id"]: job_runs(job["overrides"]) for job in jobs}
    assert runs["8"] is False and runs["9"] is True
    assert sum(runs.values()) == 10001


def test_a_resume_is_refused_by_the_live_jobs_that_may_run_its_cells_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [
        {"job_id": f"7_{i}", "overrides": [f"a={i % 100}", f"b={i // 100}"]} for i in range(1000)
    ]
    jobs.append({"job_id": "8", "overrides": ["a=100"]})  # a cell of another grid
    write_json_atomic(tmp_path / JOBS_FILE, {"cluster": "slurm", "jobs": jobs})
    monkeypatch.setattr(workflow, "marked_jobs", lambda root: {})  # none unrecorded
    monkeypatch.setattr(workflow, "job_states", lambda ids: dict.fromkeys(ids, "RUNNING"))
    with pytest.raises(SweepBusyError, match="still live") as refused:
        workflow._refuse_live_submission(tmp_path, {"a": [100]}, slurm=True)
    assert "8 (RUNNING)" in str(refused.value) and "7_" not in str(refused.value)
    with pytest.raises(SweepBusyError, match=r"7_\S* \(RUNNING\)") as refused:
        workflow._refuse_live_submission(tmp_path, {"a": [5], "b": [3]}, slurm=True)
    assert "8 (RUNNING)" not in str(refused.value)
    # no live job may run a cell of this grid: they are carried, the run goes on
    workflow._refuse_live_submission(tmp_path, {"a": [200]}, slurm=True)
    carried = read_json(tmp_path / JOBS_FILE)["jobs"]
    assert len(carried) == 1001 and all(e["carried"] for e in carried)

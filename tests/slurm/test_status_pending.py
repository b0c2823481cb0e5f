# SPDX-License-Identifier: MIT
"""``status`` of cells that wait in the queue of the real local SLURM cluster: each shows
its job id and squeue's reason, and a job that can never start (3 nodes asked of a 2-node
partition) is marked so, from one ``squeue`` call for the whole sweep."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from mushin_box._core.sidecars import timestamp, write_json_atomic
from mushin_box._slurm.submitted import job_ids, read_submission
from mushin_box.cli.main import main

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _status(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["status", str(root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == data["exit_code"]
    return data


def _until(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_held_launch_shows_each_cell_s_job_and_reason(
    tmp_path: Path,
    slurm_cluster: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "sweep"
    monkeypatch.chdir(REPO)
    argv = ["launch", "examples/exp.py", "--slurm", "--gpus", "1", "--detach"]
    argv += ["--partition", slurm_cluster.partition, "--sbatch", "hold"]
    argv += ["--working-dir", str(root), "module.lr=0.01,0.1"]
    try:
        assert main(argv) == 0
        jobs = job_ids(read_submission(root))
        assert len(jobs) == 2

        def held() -> dict[str, Any] | None:
            data = _status(root, capsys)
            reasons = [c["reason"] for c in data["cells"]]
            return data if reasons == ["JobHeldUser"] * 2 else None

        data = _until(held, 60, "squeue to say JobHeldUser")
        assert [c["state"] for c in data["cells"]] == ["pending", "pending"]
        assert sorted(c["job_id"] for c in data["cells"]) == sorted(jobs)
        assert not any(c["never_starts"] for c in data["cells"])
        assert data["exit_code"] == 3  # they may still start (scontrol release)

        monkeypatch.setenv("COLUMNS", "80")
        capsys.readouterr()
        main(["status", str(root)])
        rows = [line for line in capsys.readouterr().out.splitlines() if " pending " in line]
        assert len(rows) == 2 and all("JobHeldUser" in r for r in rows)
        assert sorted(j for r in rows for j in jobs if j in r.split()) == sorted(jobs)
    finally:
        subprocess.run(["scancel", *job_ids(read_submission(root))], check=False, timeout=60)


def test_a_job_that_can_never_start_says_so(
    tmp_path: Path, slurm_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sweep"
    grid = {"lr": [0.1]}
    write_json_atomic(root / "mushin_sweep.json", {"grid": grid, "params": ["lr"], "cells": {}})
    # a shape the partition can't hold, submitted by hand (a launch refuses it)
    nodes = f"--nodes={len(slurm_cluster.nodes) + 1}"
    submitted = subprocess.run(
        ["sbatch", "--parsable", nodes, f"--partition={slurm_cluster.partition}"]
        + ["--output=/dev/null", "--wrap", "sleep 1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    job = submitted.stdout.strip().split(";")[0]
    record = {"schema": 1, "cluster": "slurm", "host": "login1", "submitted": timestamp()}
    jobs = [{"job_id": job, "overrides": ["lr=0.1"]}]
    write_json_atomic(root / "mushin_jobs.json", {**record, "detached": True, "jobs": jobs})
    try:

        def never() -> dict[str, Any] | None:
            cell = _status(root, capsys)["cells"][0]
            return cell if cell["never_starts"] else None

        cell = _until(never, 60, "squeue to give a never-start reason")
        assert cell["state"] == "pending" and cell["job_id"] == job
        assert cell["reason"] in ("PartitionNodeLimit", "PartitionConfig")
        capsys.readouterr()
        main(["status", str(root)])
        assert f"will never start: {cell['reason']}" in capsys.readouterr().out
    finally:
        subprocess.run(["scancel", job], check=False, timeout=60)


def test_a_running_slurm_cell_shows_its_epoch_in_status_json(
    tmp_path: Path, slurm_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from ddp_helpers import fit_task, make_app_config

    from mushin_box import Workflow, multirun, submitit_slurm_config

    root = tmp_path / "sweep"
    config = {
        **submitit_slurm_config(
            nodes=1, gpus_per_node=1, partition=slurm_cluster.partition, timeout_min=10
        ),
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
    }
    swept: dict[str, Any] = {"module.epoch_sleep_s": multirun([2.0])}  # 2 s a epoch
    Workflow(fit_task, make_app_config(devices=1, max_epochs=30)).run(
        working_dir=root,
        launcher="mushin_slurm",
        launcher_config=config,
        wait=False,
        progress=False,
        **swept,
    )
    try:

        def at_epoch() -> dict[str, Any] | None:
            cell = _status(root, capsys)["cells"][0]
            return cell if cell["state"] == "running" and (cell["epoch"] or 0) >= 1 else None

        cell = _until(at_epoch, 300, "the running cell to report an epoch")
        assert isinstance(cell["metric"], str) and isinstance(cell["metric_value"], float)
        assert cell["job_id"] in job_ids(read_submission(root))
        capsys.readouterr()
        main(["status", str(root)])
        row = next(r for r in capsys.readouterr().out.splitlines() if " running " in r)
        assert re.search(rf"epoch \d+ {re.escape(cell['metric'])} \S+", row), row
    finally:
        main(["cancel", str(root)])
        subprocess.run(["scancel", *job_ids(read_submission(root))], check=False, timeout=60)

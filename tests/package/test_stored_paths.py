# SPDX-License-Identifier: MIT
"""What was written before the rooms moved still works: a record and a pickled job.

``tests/golden/rooms-ii/`` was made by the code before Rooms II split ``_sweep``:
``sweep/`` is ``mushin-box launch examples/exp.py --gpus 1 trainer.max_epochs=1`` (its
checkpoints left out), ``job.pkl`` a cloudpickled submitit job of a config-only cell, as a
queued job holds it. Both name ``mushin_box._sweep.launch.fit_task`` (and
``seed_pre_call``), a module that no longer exists.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

import mushin_box

STORED = GOLDEN / "rooms-ii"


def test_a_job_pickled_before_the_move_unpickles_to_the_same_functions() -> None:
    job = pickle.loads((STORED / "job.pkl").read_bytes())
    runner = job.function
    assert runner.task is mushin_box.fit_task  # type: ignore[attr-defined]
    assert runner.pre_call is mushin_box.seed_pre_call  # type: ignore[attr-defined]
    assert runner.plan.working_dir == "/sweeps/golden" and runner.plan.resume
    assert job.args == ({"module": {"lr": 0.1}},)


def test_a_job_pickled_now_names_the_stable_path() -> None:
    import cloudpickle

    from mushin_box._sweep.cells import CellPlan, CellRunner

    runner = CellRunner(
        mushin_box.fit_task,  # type: ignore[attr-defined]
        CellPlan(working_dir="/w", swept=()),
        pre_call=mushin_box.seed_pre_call,  # type: ignore[attr-defined]
    )
    data = cloudpickle.dumps(runner)
    # by reference (no code inside), under the name no later move changes
    assert b"mushin_box\x94\x8c\x08fit_task" in data and b"_train" not in data
    assert b"co_code" not in data and pickle.loads(data).task is runner.task


def test_the_recorded_task_loads_and_keeps_its_fingerprint() -> None:
    from omegaconf import OmegaConf

    from mushin_box._provenance.task import load_callable
    from mushin_box._sweep.usercode import code_identity

    cell = STORED / "sweep" / "cell"
    record = json.loads((cell / "mushin_provenance.json").read_text())
    located = record["run"]["task"]
    assert located["task"]["module"] == "mushin_box._sweep.launch"  # the old path
    task, _ = load_callable(located["task"])
    pre_call, _ = load_callable(located["pre_call"])
    assert (task, pre_call) == (mushin_box.fit_task, mushin_box.seed_pre_call)  # type: ignore[attr-defined]
    # the same fingerprint: a resume of a sweep launched before the move reuses its cells
    config = OmegaConf.load(cell / ".hydra" / "config.yaml")
    now = code_identity(task, config=config, extra=(pre_call,)).fingerprint
    assert now == record["reproducibility"]["code"]["task_sha256"]


def test_the_stable_names_are_not_api() -> None:
    assert "fit_task" not in mushin_box.__all__ and "seed_pre_call" not in mushin_box.__all__


@pytest.mark.slow
def test_a_record_from_before_the_move_reproduces(tmp_path: Path) -> None:
    sweep = tmp_path / "old"
    shutil.copytree(STORED / "sweep", sweep)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mushin_box",
            "reproduce",
            str(sweep / "cell"),
            "--local",
            "--into",
            str(tmp_path / "again"),
            "--allow-dirty",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    # exit 1: the checkout is not the record's commit (the record is older than HEAD), and
    # the package set may have moved since; nothing that the move could break differs
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    verdict = json.loads(proc.stdout)
    assert verdict["error"] is None
    (cell,) = verdict["diff"]["cells"]
    environment = ("reproducibility.code.git.", "reproducibility.package")
    broken = [d["path"] for d in cell["breaks_reproducibility"]]
    assert [p for p in broken if not p.startswith(environment)] == [], broken
    assert cell["metrics_match"] is True
    assert {m["name"] for m in cell["metrics"] if m["match"]} == {"train_loss", "val_loss"}

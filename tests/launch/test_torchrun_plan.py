# SPDX-License-Identifier: MIT
"""``launch --torchrun`` as a plan: each cell one ``torchrun --standalone`` agent of
``--gpus`` workers (``mushin_local`` with ``torchrun``), refused on SLURM for now; and the
launcher's own checks of its torchrun fields."""

from __future__ import annotations

import pytest
from conftest import REPO, run_doctests

import mushin_box._slurm.torchrun
from mushin_box._launch.loading import load_target
from mushin_box._launch.plan import LaunchError, plan_launch
from mushin_box._slurm.launcher import SubmititCellLauncher
from mushin_box._slurm.torchrun import torchrun_argv

EXP = str(REPO / "examples" / "exp.py")


def test_doctests() -> None:
    assert run_doctests(mushin_box._slurm.torchrun).failed == 0


def test_a_local_torchrun_plan_runs_each_cell_as_one_agent_of_gpus_workers() -> None:
    target, _ = load_target(EXP)
    plan = plan_launch(target, gpus=2, local=True, torchrun=True, max_restarts=1)
    assert plan.mode == "local" and plan.torchrun and plan.launcher == "mushin_local"
    config = dict(plan.launcher_config or {})
    assert (config["torchrun"], config["nproc_per_node"], config["max_restarts"]) == (True, 2, 1)
    # the Trainer agrees with the workers, on CPU ranks here
    assert plan.overrides[-3:] == (
        "++trainer.devices=2",
        "++trainer.num_nodes=1",
        "++trainer.accelerator='cpu'",
    )
    # the launcher takes this config as it is (the one check of its fields)
    launcher = SubmititCellLauncher("local", config)
    assert launcher.settings["tasks_per_node"] == 1


@pytest.mark.parametrize("restarts", [-1, True, 1.5])
def test_a_plan_refuses_bad_restarts_with_the_launchers_own_words(restarts: object) -> None:
    target, _ = load_target(EXP)
    with pytest.raises(LaunchError, match="max_restarts must be an int >= 0"):
        plan_launch(target, gpus=2, local=True, torchrun=True, max_restarts=restarts)  # type: ignore[arg-type]


def test_torchrun_on_slurm_is_refused_for_now() -> None:
    target, _ = load_target(EXP)
    with pytest.raises(LaunchError, match="--torchrun on SLURM is not supported yet"):
        plan_launch(target, gpus=2, local=False, where="--slurm", torchrun=True)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"nproc_per_node": 2}, "configure torchrun: set torchrun=true"),
        ({"torchrun": True, "tasks_per_node": 2}, "leave tasks_per_node at 1"),
        ({"torchrun": True, "nproc_per_node": 0}, "nproc_per_node must be an int >= 1"),
        ({"torchrun": True, "max_restarts": -1}, "max_restarts must be an int >= 0"),
    ],
)
def test_the_launcher_refuses_torchrun_fields_that_cannot_work(
    params: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        SubmititCellLauncher("local", params)


def test_the_agent_runs_torchrun_of_this_interpreter_on_the_worker_entry() -> None:
    argv = ["--nproc-per-node", "3", "-u", "-m", "submitit.core._submit", "/s/.submitit/%j"]
    command = torchrun_argv(argv, python="/venv/bin/python")
    assert command[:4] == ["/venv/bin/python", "-m", "torch.distributed.run", "--standalone"]
    assert command[4:8] == ["--nproc-per-node", "3", "--max-restarts", "0"]
    assert command[-2:] == ["worker", "/s/.submitit/%j"]
    with pytest.raises(SystemExit):  # not what submitit appends: refused, nothing runs
        torchrun_argv(["--nproc-per-node", "3", "train.py"])

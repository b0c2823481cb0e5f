# SPDX-License-Identifier: MIT
"""``launch --torchrun`` as a plan: here each cell one ``torchrun --standalone`` agent of
``--gpus`` workers (``mushin_local`` with ``torchrun``); on SLURM one agent per node, with a
c10d rendezvous on the job's first node (``mushin_slurm`` with ``torchrun``); and the
launcher's own checks of its torchrun fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, run_doctests

import mushin_box._launch.plan
import mushin_box._slurm.grammar
import mushin_box._slurm.torchrun
from mushin_box import submitit_slurm_config
from mushin_box._launch.loading import load_target
from mushin_box._launch.plan import LaunchError, plan_launch
from mushin_box._slurm.launcher import SubmititCellLauncher, render_sbatch
from mushin_box._slurm.torchrun import torchrun_argv

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

EXP = str(REPO / "examples" / "exp.py")


def test_doctests() -> None:
    for module in (mushin_box._slurm.torchrun, mushin_box._launch.plan):
        assert run_doctests(module).failed == 0
    assert run_doctests(mushin_box._slurm.grammar).failed == 0  # moved out of config.py


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


SLURM_ENV = {"SLURM_JOB_ID": "4321", "MUSHIN_JOB_NODES": "gpu09,gpu10"}
SUBMIT = ["-u", "-m", "submitit.core._submit", "/s/.submitit/%j"]


def test_a_slurm_torchrun_plan_is_one_agent_per_node_holding_its_gpus() -> None:
    target, _ = load_target(EXP)
    plan = plan_launch(
        target,
        nodes=2,
        gpus=4,
        local=False,
        where="--slurm",
        torchrun=True,
        max_restarts=2,
        slurm={"cpus_per_task": 2},
        preflight=False,
    )
    assert plan.mode == "slurm" and plan.torchrun and plan.launcher == "mushin_slurm"
    config = dict(plan.launcher_config or {})
    assert (config["nodes"], config["tasks_per_node"], config["gpus_per_node"]) == (2, 1, 4)
    assert config["cpus_per_task"] == 8  # 2 per worker, 4 workers in the node's one task
    assert (config["nproc_per_node"], config["max_restarts"]) == (4, 2)
    assert "++trainer.devices=4" in plan.overrides and "++trainer.num_nodes=2" in plan.overrides
    script = render_sbatch(config, "/s/.submitit/%j")
    assert "#SBATCH --ntasks-per-node=1" in script and "#SBATCH --nodes=2" in script
    agent = "-m mushin_box._slurm.torchrun agent --nproc-per-node 4 --max-restarts 2 --nnodes 2"
    assert agent + " -u -m submitit.core._submit" in script


def test_the_slurm_agent_runs_torchrun_with_a_c10d_rendezvous_on_the_first_node() -> None:
    env = dict(SLURM_ENV)
    argv = ["--nproc-per-node", "4", "--max-restarts", "1", "--nnodes", "1:2", *SUBMIT]
    command = torchrun_argv(argv, python="/venv/bin/python", environ=env)
    assert command[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"]
    flags = dict(zip(command[3:15:2], command[4:15:2], strict=True))
    assert flags == {
        "--nnodes": "1:2",
        "--nproc-per-node": "4",
        "--max-restarts": "1",
        "--rdzv-backend": "c10d",
        "--rdzv-endpoint": "gpu09:29321",  # the job's first node; 25000 + the id's last digits
        "--rdzv-id": "4321",
    }
    assert command[15:] == ["-m", "mushin_box._slurm.torchrun", "worker", "--slurm", SUBMIT[-1]]
    # exported for the workers, and so for the record
    assert env["MUSHIN_RDZV_ENDPOINT"] == "gpu09:29321" and env["MUSHIN_RDZV_ID"] == "4321"
    # an array task's agents meet under the task's own id (not the array's)
    env = {**SLURM_ENV, "SLURM_ARRAY_JOB_ID": "4300", "SLURM_ARRAY_TASK_ID": "21"}
    command = torchrun_argv(argv, python="py", environ=env)
    assert command[command.index("--rdzv-id") + 1] == "4300_21"
    with pytest.raises(SystemExit):  # outside a SLURM job: refused, nothing runs
        torchrun_argv(argv, python="py", environ={})


def test_python_gets_the_same_fields_from_submitit_slurm_config() -> None:
    target, _ = load_target(EXP)
    plan = plan_launch(
        target,
        nodes=2,
        gpus=2,
        local=False,
        where="--slurm",
        torchrun=True,
        max_restarts=1,
        preflight=False,
    )
    config = submitit_slurm_config(nodes=2, gpus_per_node=2, torchrun=True, max_restarts=1)
    assert {k: v for k, v in (plan.launcher_config or {}).items() if k in config} == config
    with pytest.raises(ValueError, match="configure torchrun: pass torchrun=True"):
        submitit_slurm_config(nodes=2, gpus_per_node=2, max_restarts=1)


def test_elastic_membership_gives_torchrun_min_max_and_the_trainer_the_group() -> None:
    target, _ = load_target(EXP)
    plan = plan_launch(
        target,
        nodes=3,
        gpus=2,
        local=False,
        where="--slurm",
        torchrun=True,
        min_nodes=2,
        preflight=False,
    )
    config = dict(plan.launcher_config or {})
    assert config["nodes"] == 3 and config["min_nodes"] == 2  # sbatch gets MAX nodes
    assert config["srun_args"] == ["--kill-on-bad-exit=0"]  # the others go on without one
    assert "--nnodes 2:3" in render_sbatch(config, "/s/%j")
    assert plan.overrides[-1] == "++trainer.num_nodes='${oc.decode:${oc.env:GROUP_WORLD_SIZE,3}}'"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 2, "min_nodes": 1}, "is torchrun's elastic membership: add --torchrun"),
        ({"nodes": 2, "min_nodes": 3, "torchrun": True}, "MIN must not exceed MAX"),
    ],
)
def test_bad_node_ranges_are_refused(kwargs: dict[str, object], message: str) -> None:
    target, _ = load_target(EXP)
    with pytest.raises(LaunchError, match=message):
        plan_launch(target, gpus=2, local=False, where="--slurm", preflight=False, **kwargs)  # type: ignore[arg-type]


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
    # environ: the agent exports the rendezvous; never into this process's environment
    command = torchrun_argv(argv, python="/venv/bin/python", environ={})
    assert command[:4] == ["/venv/bin/python", "-m", "torch.distributed.run", "--standalone"]
    assert command[4:8] == ["--nproc-per-node", "3", "--max-restarts", "0"]
    assert command[-2:] == ["worker", "/s/.submitit/%j"]
    with pytest.raises(SystemExit):  # not what submitit appends: refused, nothing runs
        torchrun_argv(["--nproc-per-node", "3", "train.py"], environ={})


def test_slurm_workers_present_torchruns_world_and_name_each_groups_node(tmp_path: Path) -> None:
    from mushin_box._provenance.topology import topology_from_env
    from mushin_box._slurm.torchrun import (
        _group_nodes,  # pyright: ignore[reportPrivateUsage]
        _present_slurm_world,  # pyright: ignore[reportPrivateUsage]
        present_group_restarts,
    )

    # the node task's SLURM variables (task 0 of 2: it joined second, so torchrun's group 1)
    task = {**SLURM_ENV, "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODEID": "0"}
    world = {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "2"}
    rounds = {"MASTER_ADDR": "gpu10", "MASTER_PORT": "41000", "TORCHELASTIC_RESTART_COUNT": "0"}
    second = {**task, **world, **rounds, "RANK": "2", "LOCAL_RANK": "0", "GROUP_RANK": "1"}
    second["SLURMD_NODENAME"] = "gpu09"
    _present_slurm_world(second)
    assert (second["SLURM_PROCID"], second["SLURM_LOCALID"], second["SLURM_NODEID"]) == (
        "2",
        "0",
        "1",
    )
    assert (second["SLURM_NTASKS"], second["SLURM_TASKS_PER_NODE"]) == ("4", "2(x2)")
    folder = str(tmp_path / "%j")
    where = present_group_restarts(folder, second)
    assert _group_nodes(where, second) is None  # not rank 0: it only says where it is
    first = {**task, **world, **rounds, "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"}
    first.update(SLURMD_NODENAME="gpu10", SLURM_NODEID="1")
    nodes = _group_nodes(present_group_restarts(folder, first), first)
    assert nodes == ["gpu10", "gpu09"]  # by group rank, not in the node list's order
    first["MUSHIN_RDZV_NODES"] = ",".join(nodes or [])
    topology = topology_from_env(first, hostname="login")
    assert topology.nodes == ("gpu10", "gpu09")
    assert topology.tasks_per_node == (2, 2)
    own = [(r.global_rank, r.node_rank, r.hostname) for r in topology.ranks]
    assert own == [(0, 0, "gpu10")]  # the other ranks record where they ran themselves


def test_every_node_of_a_restarted_group_counts_the_same_restarts(tmp_path: Path) -> None:
    """torchrun's count is per agent: the node whose worker died counts a restart, the
    healthy node re-forms the group at 0. The workers present the group's rounds instead,
    so every rank continues the cell from its checkpoint, under one attempt number."""
    from mushin_box._slurm.torchrun import present_group_restarts

    folder = str(tmp_path / "%j")
    base = {**SLURM_ENV, "MASTER_ADDR": "gpu10"}

    def worker(port: str, torchrun_count: str, requeues: str = "0") -> str:
        env = {**base, "MASTER_PORT": port, "TORCHELASTIC_RESTART_COUNT": torchrun_count}
        env["SLURM_RESTART_COUNT"] = requeues
        present_group_restarts(folder, env)
        return env["TORCHELASTIC_RESTART_COUNT"]

    assert [worker("41000", "0"), worker("41000", "0")] == ["0", "0"]  # round 1, 2 nodes
    # round 2 (a new port): the healthy node's torchrun says 0, the failed one's 1
    assert [worker("41777", "0"), worker("41777", "1")] == ["1", "1"]
    assert worker("41999", "0") == "2"  # round 3, the one node left
    # a requeued job (SLURM_RESTART_COUNT 1) starts its own count
    assert [worker("41000", "0", "1"), worker("42000", "0", "1")] == ["0", "1"]

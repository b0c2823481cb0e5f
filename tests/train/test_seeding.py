# SPDX-License-Identifier: MIT
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from mushin_box import global_rank_from_env, seed_everything_per_rank, seed_for_rank
from mushin_box._train.seeding import seed_records


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({}, 0),
        ({"RANK": "3"}, 3),
        ({"SLURM_PROCID": "5"}, 5),
        ({"RANK": "2", "SLURM_PROCID": "7"}, 2),  # torchrun inside an allocation
        ({"MUSHIN_GLOBAL_RANK": "1", "SLURM_PROCID": "0"}, 1),  # HydraDDP's own ranks first
    ],
)
def test_global_rank_from_env(env: dict[str, str], rank: int) -> None:
    assert global_rank_from_env(env) == rank


def test_bad_rank_env_names_the_variable() -> None:
    with pytest.raises(ValueError, match="RANK='x'"):
        global_rank_from_env({"RANK": "x"})


@pytest.mark.parametrize("bad", [1.5, "1", True, None])
def test_seed_base_must_be_int(bad: object) -> None:
    with pytest.raises(TypeError, match="seed base must be an int"):
        seed_for_rank(bad, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_seed_everything_per_rank_seeds_all_rngs_and_records(
    rank: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", str(rank))
    seed = seed_everything_per_rank(1234)
    assert seed == 1234 + rank
    got = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    assert got == (random.random(), float(np.random.rand()), float(torch.rand(())))
    record = json.loads((tmp_path / ".mushin" / "seeds" / f"rank{rank}.json").read_text())
    assert record == {"base": 1234, "rank": rank, "seed": seed, "workers": True}
    assert seed_records(tmp_path)[rank]["seed"] == seed


# --- every launcher's own variables give every rank its own seed (issue 17, item 9) ---


def _lightning_children_env(
    monkeypatch: pytest.MonkeyPatch, launcher: object, start: object
) -> list[dict[str, str]]:
    """The environments a launcher gives the ranks it starts, captured at ``Popen``
    (``subprocess`` is one module: HydraDDP's launcher is caught too)."""
    started: list[dict[str, str]] = []

    class _Proc:
        def __init__(self, *args: object, env: dict[str, str], **kwargs: object) -> None:
            started.append(dict(env))

        def poll(self) -> None:
            return None

    import subprocess

    monkeypatch.setattr(subprocess, "Popen", _Proc)
    start()  # type: ignore[operator]
    return started


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No launcher variable of the test process leaks in; launchers' writes are undone."""
    names = (
        "RANK LOCAL_RANK NODE_RANK GROUP_RANK LOCAL_WORLD_SIZE WORLD_SIZE MASTER_ADDR "
        "MASTER_PORT MUSHIN_GLOBAL_RANK SLURM_PROCID SLURM_LOCALID SLURM_NTASKS SLURM_JOB_ID"
    ).split()
    for name in names:
        monkeypatch.setenv(name, "")  # recorded, so teardown also removes what launchers set
        monkeypatch.delenv(name)
    monkeypatch.setenv("MASTER_PORT", "29555")  # no free-port search
    return monkeypatch


@pytest.mark.parametrize("in_srun_shell", [False, True])
def test_lightning_ddp_launcher_ranks_get_their_own_rank(
    clean_env: pytest.MonkeyPatch, in_srun_shell: bool
) -> None:
    # Lightning's strategy="ddp" re-runs the script with LOCAL_RANK/NODE_RANK/WORLD_SIZE
    # only; inside `srun --pty bash` its ranks also inherit SLURM_PROCID=0 from the shell
    from lightning_fabric.plugins.environments.lightning import LightningEnvironment
    from lightning_fabric.strategies.launchers.subprocess_script import (
        _SubprocessScriptLauncher,
    )

    if in_srun_shell:
        clean_env.setenv("SLURM_PROCID", "0")
        clean_env.setenv("SLURM_LOCALID", "0")
    launcher = _SubprocessScriptLauncher(LightningEnvironment(), num_processes=3, num_nodes=1)
    main_rank = global_rank_from_env()  # the user's script seeds before its Trainer runs
    children = _lightning_children_env(clean_env, launcher, launcher._call_children_scripts)
    assert "RANK" not in children[0] and "LOCAL_RANK" in children[0]
    assert [main_rank] + [global_rank_from_env(env) for env in children] == [0, 1, 2]
    assert global_rank_from_env() == 0  # rank 0 during fit: LOCAL_RANK=0 now set


def test_lightning_ddp_launcher_on_a_second_node(clean_env: pytest.MonkeyPatch) -> None:
    from lightning_fabric.plugins.environments.lightning import LightningEnvironment
    from lightning_fabric.strategies.launchers.subprocess_script import (
        _SubprocessScriptLauncher,
    )

    clean_env.setenv("NODE_RANK", "1")
    clean_env.setenv("MASTER_ADDR", "node0")
    launcher = _SubprocessScriptLauncher(LightningEnvironment(), num_processes=2, num_nodes=2)
    children = _lightning_children_env(clean_env, launcher, launcher._call_children_scripts)
    # the launcher does not say how many ranks a node has: the user must
    with pytest.raises(ValueError, match="set LOCAL_WORLD_SIZE"):
        global_rank_from_env(children[0])
    assert global_rank_from_env({**children[0], "LOCAL_WORLD_SIZE": "2"}) == 3
    clean_env.setenv("LOCAL_WORLD_SIZE", "2")
    clean_env.delenv("LOCAL_RANK")  # node 1's main process before its Trainer runs
    assert global_rank_from_env() == 2


def test_hydraddp_ranks_get_their_own_rank(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # HydraDDP's ranks inherit rank 0's environment (SLURM_PROCID too) plus its own variable
    from lightning_fabric.plugins.environments.lightning import LightningEnvironment

    import mushin_box._train.ddp as ddp

    clean_env.setenv("SLURM_PROCID", "0")

    class _NoObserver:
        def __init__(self, *args: object) -> None: ...

        def start(self) -> None: ...

    clean_env.setattr(ddp, "ChildObserver", _NoObserver)
    launcher = ddp.launcher_classes("pytorch_lightning")[1](LightningEnvironment(), 3, 1)
    spec = {"job_dir": str(tmp_path), "cwd": str(tmp_path)}

    def start() -> None:
        launcher._set_dist_env()
        launcher._spawn_children(spec)  # pyright: ignore[reportArgumentType]

    children = _lightning_children_env(clean_env, launcher, start)
    launcher._restore_env()
    assert [global_rank_from_env(env) for env in children] == [1, 2]


def _torchrun_env(rank: int, local: int, node: int) -> dict[str, str]:
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(local),
        "GROUP_RANK": str(node),
        "ROLE_RANK": str(rank),
        "LOCAL_WORLD_SIZE": "2",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "node0",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "none",
    }


def test_torchrun_and_srun_ranks_get_their_own_rank() -> None:
    from mushin_box.testing import simulated_slurm_env

    torchrun = [_torchrun_env(r, r % 2, r // 2) for r in range(4)]
    assert [global_rank_from_env(env) for env in torchrun] == [0, 1, 2, 3]
    # torchrun started by one srun task per node: SLURM_PROCID is the node's, RANK wins
    in_slurm = [{**env, **simulated_slurm_env(2, 1, rank=r // 2)} for r, env in enumerate(torchrun)]
    assert [global_rank_from_env(env) for env in in_slurm] == [0, 1, 2, 3]
    srun = [simulated_slurm_env(2, 4, rank=r) for r in range(8)]
    assert [global_rank_from_env(env) for env in srun] == list(range(8))
    # a batch script that exports LOCAL_RANK=$SLURM_LOCALID: SLURM's numbering still holds
    exported = [{**env, "LOCAL_RANK": env["SLURM_LOCALID"]} for env in srun]
    assert [global_rank_from_env(env) for env in exported] == list(range(8))


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"LOCAL_RANK": "-1"}, "LOCAL_RANK='-1'"),
        ({"NODE_RANK": "1", "LOCAL_RANK": "0"}, "set LOCAL_WORLD_SIZE"),
        ({"NODE_RANK": "1", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_WORLD_SIZE='2'"),
    ],
)
def test_inconsistent_rank_env_names_the_problem(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        global_rank_from_env(env)


def test_seed_everything_per_rank_under_lightning_ddp_child(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    for name, value in {"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2"}.items():
        clean_env.setenv(name, value)
    assert seed_everything_per_rank(1234) == 1235
    assert seed_records(tmp_path)[1]["seed"] == 1235

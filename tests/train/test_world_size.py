# SPDX-License-Identifier: MIT
"""The world-size check of HydraDDP under an external launcher, over every shape of mismatch.

Unit tests of the pure check (:mod:`mushin_box._train.world`), plus how ``ddp.py`` reads the
launcher's numbers from the environment. The real multi-process case ("too many" ranks under
torchrun) is ``test_ddp.py::test_torchrun_too_many_ranks_fails_fast``.
"""

from __future__ import annotations

import pytest

from mushin_box._train.world import WorldSizeMismatchError, check_launched_world

FIX = "tasks_per_node == gpus_per_node == Trainer devices"


@pytest.mark.parametrize(
    ("world", "per_node", "devices", "num_nodes"),
    [
        (1, None, 1, 1),
        (8, 4, 4, 2),  # 2 nodes x 4 tasks
        (8, None, 4, 2),  # torchrun without LOCAL_WORLD_SIZE: the total is all it says
        (6, 3, 3, 2),
    ],
)
def test_a_matching_world_passes(world: int, per_node: int | None, devices: int, num_nodes: int):
    check_launched_world(world, "S", per_node, devices=devices, num_nodes=num_nodes)


@pytest.mark.parametrize(
    ("world", "per_node", "devices", "num_nodes", "messages"),
    [
        # too few ranks: 2 nodes x 4 tasks for a 2 x 8 Trainer (the per-node count is off too)
        (8, 4, 8, 2, ["started 8 ranks (S=8)", "= 2 x 8 = 16; 4 tasks per node"]),
        # too many: 2 x 4 tasks for a 1-node, 4-device Trainer
        (8, 4, 4, 1, ["started 8 ranks (S=8)", "= 1 x 4 = 4"]),
        (3, None, 2, 1, ["started 3 ranks", "= 1 x 2 = 2"]),  # too many, total only
        (1, None, 2, 1, ["started 1 ranks", "= 1 x 2 = 2"]),  # too few, total only
        # the right total split wrongly across nodes: 4 nodes x 2 tasks for 2 x 4
        (8, 2, 4, 2, ["2 tasks per node were launched but the Trainer has devices=4"]),
        # num_nodes mismatched: 1 node x 4 tasks for a 2-node x 2-device Trainer
        (4, 4, 2, 2, ["4 tasks per node were launched but the Trainer has devices=2"]),
        # num_nodes mismatched the other way: 2 nodes x 2 tasks for a 1-node x 4 Trainer
        (4, 2, 4, 1, ["2 tasks per node were launched but the Trainer has devices=4"]),
    ],
    ids=[
        "too-few",
        "too-many",
        "too-many-total-only",
        "too-few-total-only",
        "split-wrongly",
        "num-nodes-too-high",
        "num-nodes-too-low",
    ],
)
def test_every_mismatch_fails_with_the_numbers_and_the_fix(
    world: int, per_node: int | None, devices: int, num_nodes: int, messages: list[str]
) -> None:
    with pytest.raises(WorldSizeMismatchError) as raised:
        check_launched_world(world, "S", per_node, devices=devices, num_nodes=num_nodes)
    text = str(raised.value)
    assert text.startswith("DDP world size mismatch: ") and FIX in text
    assert "\n" not in text
    for message in messages:
        assert message in text
    # a total that matches is not reported; a per-node count that matches is not either
    assert ("ranks (S=" in text) == (world != devices * num_nodes)
    assert ("tasks per node" in text) == (per_node is not None and per_node != devices)


def test_ddp_reads_the_launchers_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ddp.py`` reads SLURM's total and per-node counts (``4(x2)`` is SLURM's shorthand for
    two nodes of four) and torchrun's, then applies the check above."""
    from lightning_fabric.plugins.environments.lightning import LightningEnvironment
    from lightning_fabric.plugins.environments.slurm import SLURMEnvironment

    from mushin_box._train.ddp import validate_launched_world

    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "4(x2)")
    validate_launched_world(SLURMEnvironment(), devices=4, num_nodes=2)
    with pytest.raises(WorldSizeMismatchError, match="4 tasks per node .* devices=2"):
        validate_launched_world(SLURMEnvironment(), devices=2, num_nodes=4)
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    with pytest.raises(WorldSizeMismatchError, match=r"started 3 ranks \(WORLD_SIZE=3\)"):
        validate_launched_world(LightningEnvironment(), devices=2, num_nodes=1)

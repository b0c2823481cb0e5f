# SPDX-License-Identifier: MIT
"""Does the world an external launcher (SLURM tasks, torchrun) started match the
Trainer's ``num_nodes x devices``? A mismatch would hang every rank at rendezvous. A pure
function of numbers (``ddp.py`` reads them), tested without torch or a launcher.
"""

from __future__ import annotations

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.targets import public


@public
class WorldSizeMismatchError(MushinBoxError, RuntimeError):
    """The launched ranks do not match the Trainer's ``num_nodes x devices``."""


_FIX = (
    ". Without this check the ranks would hang at rendezvous. Fix: launch exactly one "
    "task per device, tasks_per_node == gpus_per_node == Trainer devices and nodes == "
    "Trainer num_nodes (mushin_box.submitit_slurm_config derives tasks_per_node from "
    "gpus_per_node; for torchrun use --nproc-per-node=devices --nnodes=num_nodes)."
)


def check_launched_world(
    world: int, source: str, per_node: int | None, *, devices: int, num_nodes: int
) -> None:
    """Raise :class:`WorldSizeMismatchError`, naming every problem and the fix, unless the
    ``world`` ranks launched (read from ``source``), and the ``per_node`` tasks per node
    when the launcher says (the right total can still be split wrongly), match the
    Trainer's ``devices`` and ``num_nodes``.

    >>> check_launched_world(8, "SLURM_NTASKS", 4, devices=4, num_nodes=2)
    >>> check_launched_world(8, "SLURM_NTASKS", 2, devices=4, num_nodes=2)
    Traceback (most recent call last):
    ...
    mushin_box.WorldSizeMismatchError: DDP world size mismatch: 2 tasks per node ... devices=4...
    """
    expected = devices * num_nodes
    problems = []
    if world != expected:
        problems.append(
            f"the launcher started {world} ranks ({source}={world}) but the Trainer expects "
            f"num_nodes x devices = {num_nodes} x {devices} = {expected}"
        )
    if per_node is not None and per_node != devices:
        problems.append(
            f"{per_node} tasks per node were launched but the Trainer has devices={devices}"
        )
    if problems:
        raise WorldSizeMismatchError("DDP world size mismatch: " + "; ".join(problems) + _FIX)

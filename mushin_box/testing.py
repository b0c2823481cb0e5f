# SPDX-License-Identifier: MIT
"""Helpers for tests, examples and benchmarks: a tiny model, and simulated SLURM worlds.

``TinyModule``/``TinyDataModule`` (a linear regressor and its data, CPU, seconds) need
torch and are loaded on first use; the simulators (:func:`simulate_topology`,
:func:`simulated_slurm_env`) do not, so a benchmark of provenance at 4096 ranks imports
no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mushin_box._provenance.topology import RankPlacement, SlurmJob, Topology

__all__ = ["TinyDataModule", "TinyModule", "simulate_topology", "simulated_slurm_env"]

if TYPE_CHECKING:  # pragma: no cover
    from mushin_box._train.pl import TinyDataModule, TinyModule


def __getattr__(name: str) -> Any:
    if name in ("TinyDataModule", "TinyModule"):
        value = getattr(importlib.import_module("mushin_box._train.pl"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mushin_box.testing' has no attribute {name!r}")


def _node_names(nodes: int | Sequence[str]) -> list[str]:
    if isinstance(nodes, int):
        if nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {nodes}")
        return [f"node{i:04d}" for i in range(1, nodes + 1)]
    names = list(nodes)
    if not names:
        raise ValueError("nodes must not be empty")
    return names


def simulate_topology(
    nodes: int | Sequence[str], gpus_per_node: int, *, seed_base: int | None = None
) -> Topology:
    """A SLURM world of ``nodes`` nodes with one rank per GPU (block layout), for benchmarks.

    Parameters
    ----------
    nodes : int or sequence of str
        Number of nodes (named ``node0001`` ...) or their names.
    gpus_per_node : int
        Ranks (GPUs) per node.
    seed_base : int, optional
        Record ``seed_base + global_rank`` as each rank's seed.

    Examples
    --------
    >>> simulate_topology(1024, 4).world_size
    4096
    """
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    names = _node_names(nodes)
    ranks = [
        RankPlacement(node * gpus_per_node + local, local, node, name)
        for node, name in enumerate(names)
        for local in range(gpus_per_node)
    ]
    topo = Topology(
        launcher="slurm",
        nodes=tuple(names),
        world_size=len(ranks),
        ranks=ranks,
        rank=0,
        tasks_per_node=[gpus_per_node] * len(names),
        gpus_per_node=gpus_per_node,
        slurm=SlurmJob(job_id="1", partition="sim"),
    )
    if seed_base is not None:
        topo = topo.with_seeds({r: seed_base + r for r in range(len(ranks))})
    return topo


def simulated_slurm_env(
    nodes: int | Sequence[str], gpus_per_node: int, rank: int = 0
) -> dict[str, str]:
    """The environment srun gives global rank ``rank`` of :func:`simulate_topology`'s world.

    Examples
    --------
    >>> env = simulated_slurm_env(2, 4, rank=6)
    >>> env["SLURM_JOB_NODELIST"], env["SLURM_NODEID"], env["SLURM_LOCALID"]
    ('node0001,node0002', '1', '2')
    """
    names = _node_names(nodes)
    world = len(names) * gpus_per_node
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    node, local = divmod(rank, gpus_per_node)
    per = f"{gpus_per_node}(x{len(names)})" if len(names) > 1 else str(gpus_per_node)
    return {
        "SLURM_JOB_ID": "1",
        "SLURM_JOB_PARTITION": "sim",
        "SLURM_JOB_NODELIST": ",".join(names),
        "MUSHIN_JOB_NODES": ",".join(names),
        "SLURM_NTASKS": str(world),
        "SLURM_TASKS_PER_NODE": per,
        "SLURM_NTASKS_PER_NODE": str(gpus_per_node),
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(node),
        "SLURMD_NODENAME": names[node],
        "SLURM_GPUS_ON_NODE": str(gpus_per_node),
    }

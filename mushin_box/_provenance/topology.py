# SPDX-License-Identifier: MIT
"""The world a cell ran in: nodes, ranks and where each rank ran (a value, read from the env).

It is *run* provenance: one experiment can run at world size 1, 2 or 4. A process knows
only its own placement, so a SLURM or torchrun topology lists one rank (the others record
themselves, :mod:`mushin_box._provenance.ranks`); a single-node world (HydraDDP, one
process) runs on this host and lists every rank.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import subprocess
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import attrs

from mushin_box._core.layout import GLOBAL_RANK_ENV, JOB_NODES_ENV, RDZV_ENV


class RankPlacement(NamedTuple):
    """Where one global rank ran, and the seed it used (``None``: not known)."""

    global_rank: int
    local_rank: int
    node_rank: int
    hostname: str | None
    seed: int | None = None


RANK_COLUMNS: tuple[str, ...] = RankPlacement._fields  #: the columns of a record's rank rows


@attrs.frozen
class SlurmJob:
    """The SLURM job a world belongs to (each field ``None`` when SLURM did not set it)."""

    job_id: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    partition: str | None = None
    account: str | None = None
    step_id: str | None = None
    cluster: str | None = None

    #: each field's variables, the first set wins
    _ENV: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "job_id": ("SLURM_JOB_ID", "SLURM_JOBID"),
        "array_job_id": ("SLURM_ARRAY_JOB_ID",),
        "array_task_id": ("SLURM_ARRAY_TASK_ID",),
        "partition": ("SLURM_JOB_PARTITION", "SLURM_PARTITION"),
        "account": ("SLURM_JOB_ACCOUNT", "SLURM_ACCOUNT"),
        "step_id": ("SLURM_STEP_ID",),
        "cluster": ("SLURM_CLUSTER_NAME",),
    }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SlurmJob | None:
        values = {f: next(filter(None, map(env.get, names)), None) for f, names in cls._ENV.items()}
        if all(v is None for v in values.values()):
            return None
        return cls(**values)


@attrs.frozen
class Topology:
    """The world one process belongs to (``rank``: that process's global rank).

    >>> from mushin_box.testing import simulate_topology
    >>> topo = simulate_topology(2, 2, seed_base=10)
    >>> topo.nodes, topo.world_size
    (('node0001', 'node0002'), 4)
    >>> topo.ranks[3]
    RankPlacement(global_rank=3, local_rank=1, node_rank=1, hostname='node0002', seed=13)
    """

    launcher: str  # "slurm", "torchrun", "hydraddp" or "single"
    #: by node rank, ``None`` where the launcher does not say
    nodes: tuple[str | None, ...] = attrs.field(converter=tuple)
    world_size: int
    #: the known placements, in rank order
    ranks: tuple[RankPlacement, ...] = attrs.field(converter=tuple)
    rank: int = 0
    #: by node rank, as the launch asked (empty when it did not say)
    tasks_per_node: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    gpus_per_node: int | None = None
    slurm: SlurmJob | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def own(self) -> RankPlacement:
        """The placement of the process that read its environment."""
        return next(r for r in self.ranks if r.global_rank == self.rank)

    def with_seeds(self, seeds: Mapping[int, int] | None) -> Topology:
        """A copy with each rank's seed taken from ``seeds`` (``{global_rank: seed}``)."""
        if not seeds:
            return self
        get = seeds.get
        ranks = [RankPlacement(g, lr, n, h, get(g, s)) for g, lr, n, h, s in self.ranks]
        return attrs.evolve(self, ranks=ranks)

    def to_dict(self) -> dict[str, Any]:
        """``run.topology``; the ranks are rows (``rank_columns``): compact for 4,096 ranks."""
        return {
            "launcher": self.launcher,
            "world_size": self.world_size,
            "num_nodes": self.num_nodes,
            "nodes": list(self.nodes),
            "tasks_per_node": list(self.tasks_per_node),
            "gpus_per_node": self.gpus_per_node,
            "rank": self.rank,
            "rank_columns": list(RANK_COLUMNS),
            "ranks": [list(r) for r in self.ranks],
            "slurm": attrs.asdict(self.slurm) if self.slurm is not None else None,
        }


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    value = env.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def _gpus_per_node(env: Mapping[str, str]) -> int | None:
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_JOB_GPUS_PER_NODE"):
        m = re.search(r"(\d+)\s*$", env.get(name, "").split(",")[0])  # "4", "gpu:4", "a100:4"
        if m:
            return int(m.group(1))
    return None


def _slurm_nodes(env: Mapping[str, str]) -> list[str] | None:
    """The job's nodes in order: as the batch script expanded them, else as ``scontrol``
    expands the node list (a job mushin-box did not submit)."""
    names = [name for name in env.get(JOB_NODES_ENV, "").split(",") if name]
    if names:
        return names
    for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if value := env.get(name):
            return value.split(",") if "[" not in value else _scontrol_hostnames(value)
    return None


@functools.lru_cache(maxsize=8)
def _scontrol_hostnames(nodelist: str) -> list[str] | None:
    try:
        done = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.split() or None


def _from_slurm(env: Mapping[str, str], host: str) -> Topology:
    rank = _int(env, "SLURM_PROCID", 0) or 0
    ntasks = _int(env, "SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_NTASKS") or 1
    nodes: list[str | None] = list(_slurm_nodes(env) or [])
    node = _int(env, "SLURM_NODEID", 0) or 0
    own_host = env.get("SLURMD_NODENAME") or (nodes[node] if node < len(nodes) else host)
    if not nodes:  # no node list: only this process's node is known (the ranks name the rest)
        nodes = [None] * max(
            node + 1, _int(env, "SLURM_JOB_NUM_NODES") or _int(env, "SLURM_NNODES") or 1
        )
        nodes[node] = own_host
    per = re.match(r"\d+", env.get("SLURM_NTASKS_PER_NODE", ""))  # "4", or "4(x2)" seen
    return Topology(
        launcher="slurm",
        nodes=tuple(nodes),
        world_size=ntasks,
        ranks=[RankPlacement(rank, _int(env, "SLURM_LOCALID", 0) or 0, node, own_host)],
        rank=rank,
        tasks_per_node=[int(per.group())] * len(nodes) if per else (),
    )


def _from_torchrun(env: Mapping[str, str], host: str) -> Topology:
    rank = _int(env, "RANK", 0) or 0
    world = _int(env, "WORLD_SIZE", 1) or 1
    per = _int(env, "LOCAL_WORLD_SIZE") or world
    nnodes = _int(env, "GROUP_WORLD_SIZE") or max(1, -(-world // per))
    node = _int(env, "GROUP_RANK")
    if node is None:
        node = _int(env, "NODE_RANK", rank // per) or 0
    slurm_nodes = _slurm_nodes(env)
    by_group = [n for n in env.get(RDZV_ENV["nodes"], "").split(",") if n]  # SLURM torchrun
    nodes: list[str | None]
    host = env.get("SLURMD_NODENAME") or host  # under SLURM: the node's name in the job
    if len(by_group) == nnodes:  # the workers' own names, by torchrun's group rank
        nodes = list(by_group)
    elif slurm_nodes is not None and len(slurm_nodes) == nnodes:
        nodes = list(slurm_nodes)
    else:
        nodes = [None] * nnodes
        if 0 <= node < nnodes:
            nodes[node] = host
    local = _int(env, "LOCAL_RANK", 0) or 0
    return Topology(
        launcher="torchrun",
        nodes=tuple(nodes),
        world_size=world,
        ranks=[RankPlacement(rank, local, node, host)],
        rank=rank,
        tasks_per_node=[min(per, world - i * per) for i in range(nnodes)],
    )


def _local_world(launcher: str, world: int, rank: int, host: str) -> Topology:
    ranks = [RankPlacement(r, r, 0, host) for r in range(world)]
    return Topology(launcher, (host,), world, ranks, rank, tasks_per_node=(world,))


def topology_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    hostname: str | None = None,
    devices: int | None = None,
) -> Topology:
    """The world this process belongs to, as ``environ`` (default ``os.environ``) says:
    ranks HydraDDP started, torchrun's, SLURM's, HydraDDP's rank 0 (``devices``: the ranks
    it is about to start), else one process. ``ValueError``: a rank variable not an integer.

    >>> env = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
    ...        "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "4",
    ...        "MUSHIN_JOB_NODES": "gpu07,gpu08", "SLURM_JOB_ID": "42"}
    >>> topo = topology_from_env(env)
    >>> topo.launcher, topo.nodes, topo.world_size, topo.own.hostname
    ('slurm', ('gpu07', 'gpu08'), 8, 'gpu08')
    >>> topology_from_env({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"},
    ...                   hostname="box").nodes
    ('box',)
    >>> topology_from_env({}, hostname="box", devices=2).world_size
    2
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    host = hostname if hostname is not None else socket.gethostname()
    if env.get(GLOBAL_RANK_ENV):
        rank = _int(env, GLOBAL_RANK_ENV, 0) or 0
        world = _int(env, "WORLD_SIZE", 1) or 1
        topo = _local_world("hydraddp", world, rank, host)
    elif env.get("RANK"):
        topo = _from_torchrun(env, host)
    elif env.get("SLURM_PROCID"):
        topo = _from_slurm(env, host)
    elif env.get("WORLD_SIZE") and env.get("LOCAL_RANK"):  # HydraDDP's rank 0, children up
        world = _int(env, "WORLD_SIZE", 1) or 1
        topo = _local_world("hydraddp", world, _int(env, "LOCAL_RANK", 0) or 0, host)
    elif devices is not None and devices > 1:
        topo = _local_world("hydraddp", devices, 0, host)
    else:
        topo = _local_world("single", 1, 0, host)
    return attrs.evolve(topo, gpus_per_node=_gpus_per_node(env), slurm=SlurmJob.from_env(env))

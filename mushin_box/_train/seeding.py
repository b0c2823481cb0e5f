# SPDX-License-Identifier: MIT
"""Per-rank seeding: every rank of a world gets ``base + global_rank``."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from mushin_box._core import layout
from mushin_box._core.jobdir import mushin_dir
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._core.targets import public


def _env_rank(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name)
    if not value:
        return None
    try:
        rank = int(value)
    except ValueError:
        rank = -1
    if rank < 0:
        raise ValueError(
            f"environment variable {name}={value!r} is not a rank (an integer >= 0); "
            f"unset it or set it to this process's rank"
        )
    return rank


def _node_offset(env: Mapping[str, str], local_rank: int) -> int:
    """``node_rank x ranks_per_node + local_rank``, as Lightning's own launcher numbers ranks."""
    node = _env_rank(env, "NODE_RANK")
    if node is None:
        node = _env_rank(env, "GROUP_RANK")  # Lightning's fallback for NODE_RANK
    if not node:
        return local_rank
    per_node = _env_rank(env, "LOCAL_WORLD_SIZE")
    if not per_node or local_rank >= per_node:
        raise ValueError(
            f"NODE_RANK={node} and LOCAL_RANK={local_rank} give no global rank without the "
            f"number of ranks per node (LOCAL_WORLD_SIZE={env.get('LOCAL_WORLD_SIZE')!r}); "
            f"set LOCAL_WORLD_SIZE to the Trainer's devices, or RANK to the global rank"
        )
    return node * per_node + local_rank


@public
def global_rank_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The global rank of this process as its launcher announced it (0 when none did).

    Each launcher announces the rank in its own variables; the first that applies wins:

    1. ``MUSHIN_GLOBAL_RANK``: the ranks HydraDDP starts itself (they also inherit the
       launching process's ``SLURM_PROCID``, which is rank 0's).
    2. ``RANK``: torchrun/TorchElastic and other ``env://`` launchers.
    3. ``LOCAL_RANK`` (with ``NODE_RANK`` and ``LOCAL_WORLD_SIZE`` past node 0): Lightning's
       own ``strategy="ddp"`` launcher, whose ranks get only ``LOCAL_RANK``, ``NODE_RANK``
       and ``WORLD_SIZE``: global rank ``NODE_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK``. Under
       SLURM it applies only when ``LOCAL_RANK`` differs from ``SLURM_LOCALID``: the process
       was then started below the SLURM task, whose ``SLURM_PROCID`` it inherited.
    4. ``SLURM_PROCID``: srun tasks.
    5. ``NODE_RANK`` alone (the main process of node ``k`` under Lightning's launcher):
       ``NODE_RANK x LOCAL_WORLD_SIZE``.

    A non-integer or negative value, or a node rank above 0 without ``LOCAL_WORLD_SIZE``,
    raises ``ValueError`` naming the variable.

    Examples
    --------
    >>> from mushin_box import global_rank_from_env
    >>> global_rank_from_env({"SLURM_PROCID": "5"})
    5
    >>> global_rank_from_env({"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2"})
    1
    >>> global_rank_from_env({})
    0
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    for name in (layout.GLOBAL_RANK_ENV, "RANK"):
        rank = _env_rank(env, name)
        if rank is not None:
            return rank
    local = _env_rank(env, "LOCAL_RANK")
    slurm = _env_rank(env, "SLURM_PROCID")
    if local is not None and (slurm is None or local != _env_rank(env, "SLURM_LOCALID")):
        return _node_offset(env, local)
    if slurm is not None:
        return slurm
    return _node_offset(env, 0)


@public
def seed_for_rank(base: int, rank: int) -> int:
    """The seed rank ``rank`` gets for seed base ``base``: ``base + rank``.

    Examples
    --------
    >>> from mushin_box import seed_for_rank
    >>> [seed_for_rank(1234, r) for r in range(3)]
    [1234, 1235, 1236]
    """
    if isinstance(base, bool) or not isinstance(base, int):
        raise TypeError(f"seed base must be an int, got {base!r} ({type(base).__name__})")
    if base < 0:
        raise ValueError(f"seed base must be >= 0, got {base}")
    return base + rank


@public
def seed_everything_per_rank(base: int, workers: bool = True) -> int:
    """Seed python, numpy and torch with ``base + global_rank`` and return that seed.

    The global rank is the launcher's (:func:`mushin_box.global_rank_from_env`). A record
    ``.mushin/seeds/rank<r>.json`` is written in the job directory (see
    :func:`mushin_box.job_dir`) so provenance can list every rank's seed later. Ranks
    that HydraDDP starts after this call seed from the same base.

    Parameters
    ----------
    base : int
        The seed base shared by all ranks of the run.
    workers : bool (default: True)
        Also seed DataLoader workers (Lightning's ``seed_everything(workers=True)``).

    Returns
    -------
    int
        The seed this rank used.

    Examples
    --------
    >>> from mushin_box import seed_everything_per_rank
    >>> seed_everything_per_rank(1234)  # doctest: +SKIP
    1234
    """
    rank = global_rank_from_env()
    seed = seed_for_rank(base, rank)
    # the namespace this process loaded (``lightning`` alone when only it is); both seed
    # alike and set the variables (PL_GLOBAL_SEED, PL_SEED_WORKERS) either's workers read
    if "lightning.fabric" in sys.modules and "lightning_fabric" not in sys.modules:
        from lightning.fabric.utilities.seed import seed_everything
    else:
        from lightning_fabric.utilities.seed import seed_everything
    seed_everything(seed, workers=workers, verbose=False)
    # exported so the ranks HydraDDP starts later seed from the same base
    os.environ[layout.SEED_BASE_ENV] = str(base)
    os.environ[layout.SEED_WORKERS_ENV] = "1" if workers else "0"
    record = {"base": base, "rank": rank, "seed": seed, "workers": workers}
    write_json_atomic(mushin_dir() / layout.SEEDS_DIR / f"rank{rank}.json", record)
    return seed


def seed_records(directory: str | os.PathLike[str]) -> dict[int, dict[str, object]]:
    """Read every rank's seed record of a job directory: ``{rank: record}``."""
    out: dict[int, dict[str, object]] = {}
    for path in sorted((mushin_dir(Path(directory)) / layout.SEEDS_DIR).glob("rank*.json")):
        record = read_json(path)
        if isinstance(record, dict):
            out[int(record["rank"])] = record
    return out

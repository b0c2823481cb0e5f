# SPDX-License-Identifier: MIT
"""Per-rank seeding: every rank of a world gets ``base + global_rank``."""

from __future__ import annotations

import os
from pathlib import Path

from mushin_box._core.jobdir import job_dir, mushin_dir
from mushin_box._core.layout import (
    GLOBAL_RANK_ENV,
    JOB_PRIVATE_DIR,
    SEED_BASE_ENV,
    SEED_WORKERS_ENV,
    SEEDS_DIR,
)
from mushin_box._core.targets import public

__all__ = [
    "RANK_ENV_VARS",
    "global_rank_from_env",
    "seed_everything_per_rank",
    "seed_for_rank",
    "seed_records",
]

# Searched in this order. MUSHIN_GLOBAL_RANK is set only by HydraDDP for the ranks it
# starts itself; RANK comes from torchrun/TorchElastic; SLURM_PROCID from srun tasks.
RANK_ENV_VARS: tuple[str, ...] = (GLOBAL_RANK_ENV, "RANK", "SLURM_PROCID")
# rank 0 exports the base so the ranks it starts later seed from the same base


@public
def global_rank_from_env(environ: dict[str, str] | None = None) -> int:
    """The global rank of this process as the launcher announced it (0 when none did).

    Examples
    --------
    >>> from mushin_box import global_rank_from_env
    >>> global_rank_from_env({"SLURM_PROCID": "5"})
    5
    >>> global_rank_from_env({})
    0
    """
    env = os.environ if environ is None else environ
    for name in RANK_ENV_VARS:
        value = env.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise ValueError(
                    f"environment variable {name}={value!r} is not an integer rank; "
                    f"unset it or set it to this process's global rank"
                ) from None
    return 0


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

    The global rank comes from the launched environment (``RANK``, ``SLURM_PROCID``,
    or HydraDDP's own ranks). A record ``.mushin/seeds/rank<r>.json`` is written in the
    job directory (see :func:`mushin_box.job_dir`) so provenance can list every rank's
    seed later. Ranks that HydraDDP starts after this call seed from the same base.

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
    from lightning_fabric.utilities.seed import seed_everything

    seed_everything(seed, workers=workers, verbose=False)
    os.environ[SEED_BASE_ENV] = str(base)
    os.environ[SEED_WORKERS_ENV] = "1" if workers else "0"
    _write_record(base=base, rank=rank, seed=seed, workers=workers)
    return seed


def _write_record(*, base: int, rank: int, seed: int, workers: bool) -> None:
    from mushin_box._core.sidecars import write_json_atomic

    record = {"base": base, "rank": rank, "seed": seed, "workers": workers}
    write_json_atomic(mushin_dir() / SEEDS_DIR / f"rank{rank}.json", record)


def seed_records(directory: str | os.PathLike[str] | None = None) -> dict[int, dict[str, object]]:
    """Read every rank's seed record of a job directory: ``{rank: record}``."""
    from mushin_box._core.sidecars import read_json

    base = Path(directory) if directory is not None else job_dir()
    out: dict[int, dict[str, object]] = {}
    for path in sorted((base / JOB_PRIVATE_DIR / SEEDS_DIR).glob("rank*.json")):
        record = read_json(path)
        if isinstance(record, dict):
            out[int(record["rank"])] = record
    return out

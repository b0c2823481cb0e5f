# SPDX-License-Identifier: MIT
"""Where a SLURM job's ranks write their output, as submitit names the files.

A cell records each task's ``<folder>/<job>_<task>_log.out``/``.err`` (submitit's
``JobPaths``) in its status, so that ``mushin-box logs`` finds every rank's output from the
cell alone. A SLURM torchrun cell has one task per node: its file is listed under the
node's first rank.

Examples
--------
>>> logs = slurm_rank_logs({"SUBMITIT_EXECUTOR": "slurm", "SUBMITIT_FOLDER": "/s/%j",
...                         "SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"})
>>> logs["rank1.err"]
'/s/7/7_1_log.err'
>>> slurm_rank_logs({})
{}
>>> sorted(slurm_rank_logs({"SUBMITIT_EXECUTOR": "slurm", "SUBMITIT_FOLDER": "/s/%j",
...     "SLURM_JOB_ID": "7", "MUSHIN_JOB_NODES": "n1,n2", "LOCAL_WORLD_SIZE": "2",
...     "MUSHIN_RDZV_NODES": "n2,n1"}).items())[:2]  # group 0 ran on n2: task 1's file
[('rank0.err', '/s/7/7_1_log.err'), ('rank0.out', '/s/7/7_1_log.out')]
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mushin_box._core.layout import RDZV_ENV
from mushin_box._slurm.jobs import slurm_job_id
from mushin_box._slurm.torchrun import job_nodes


def slurm_rank_logs(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{"rank<r>.out": path, "rank<r>.err": path}`` for every task of this submitit
    SLURM job (``{}`` outside one)."""
    env = os.environ if environ is None else environ
    folder = env.get("SUBMITIT_FOLDER")
    if env.get("SUBMITIT_EXECUTOR") != "slurm" or not folder or not env.get("SLURM_JOB_ID"):
        return {}
    from submitit.core.utils import JobPaths

    job = slurm_job_id(env) or str(env["SLURM_JOB_ID"])
    try:
        tasks = max(1, int(env.get("SLURM_NTASKS", "1")))
    except ValueError:
        tasks = 1
    ranks = {task: task for task in range(tasks)}
    by_group = [n for n in env.get(RDZV_ENV["nodes"], "").split(",") if n]
    # SLURM torchrun: one task (one file) per node, listed under the node's first rank
    if by_group and env.get("LOCAL_WORLD_SIZE", "").isdigit():
        order = job_nodes(env)
        per = int(env["LOCAL_WORLD_SIZE"])
        ranks = {g * per: order.index(n) for g, n in enumerate(by_group) if n in order}
    out: dict[str, str] = {}
    for rank, task in ranks.items():
        paths = JobPaths(folder, job_id=job, task_id=task)
        out[f"rank{rank}.out"] = str(paths.stdout)
        out[f"rank{rank}.err"] = str(paths.stderr)
    return out

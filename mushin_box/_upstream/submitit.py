# SPDX-License-Identifier: MIT
"""submitit's private names, each behind one function or constant. submitit builds these
only inside its executors, as it submits; the kit needs them without submitting: the
torchrun agent, started as submitit's ``python``, hands its folder to its workers
(:data:`SUBMIT_ARGS`), and the dry run shows the script ``SlurmExecutor`` would submit.

Tests: ``tests/upstream/test_submitit_seam.py``.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

#: what submitit appends to its ``python`` command, before the job's folder
SUBMIT_ARGS = ("-u", "-m", "submitit.core._submit")


def submit_command(python: str, folder: str | os.PathLike[str]) -> str:
    """The command a submitit job runs in each task, as submitit's executors write it."""
    return " ".join([python, *SUBMIT_ARGS, shlex.quote(os.fspath(folder))])


def sbatch_mem(mem_gb: float) -> str:
    """``--mem`` as submitit writes ``mem_gb``: ``64GB``; ``512MB`` for a fraction."""
    from submitit.slurm.slurm import _convert_mem  # pyright: ignore[reportPrivateUsage]

    return _convert_mem(mem_gb)


def sbatch_script(
    command: str, folder: str | os.PathLike[str], map_count: int | None = None, **params: Any
) -> str:
    """The sbatch script ``SlurmExecutor`` submits for ``command`` with its ``params``
    (``setup`` and ``additional_parameters`` too); ``map_count``: a job array's size."""
    from submitit.slurm.slurm import _make_sbatch_string  # pyright: ignore[reportPrivateUsage]

    return _make_sbatch_string(
        command=command, folder=os.fspath(folder), map_count=map_count, **params
    )

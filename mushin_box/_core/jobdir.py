# SPDX-License-Identifier: MIT
"""Where "the job directory" is, for every rank of a job.

Ranks that HydraDDP starts get rank 0's Hydra config restored, and any other process can be
pointed at a directory with ``MUSHIN_JOB_DIR``. The working directory comes last: with
``hydra.job.chdir=False`` (Hydra >= 1.2 default) it is not the job dir.
"""

from __future__ import annotations

import os
from pathlib import Path

from mushin_box._core.layout import JOB_DIR_ENV, JOB_PRIVATE_DIR
from mushin_box._core.targets import public


@public
def job_dir() -> Path:
    """Return the directory of the current job (a Hydra job, or one HydraDDP rank of it).

    Order: Hydra's ``runtime.output_dir`` when a Hydra job is running, else the
    ``MUSHIN_JOB_DIR`` environment variable, else the current working directory.

    Examples
    --------
    >>> import os
    >>> from mushin_box import job_dir
    >>> os.environ["MUSHIN_JOB_DIR"] = "/tmp"
    >>> str(job_dir())
    '/tmp'
    >>> del os.environ["MUSHIN_JOB_DIR"]
    """
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized() and (out := HydraConfig.get().runtime.output_dir):
        return Path(out)
    env = os.environ.get(JOB_DIR_ENV)
    return Path(env) if env else Path.cwd()


def mushin_dir(base: Path | None = None) -> Path:
    """The job's private ``.mushin`` directory (seed records, rank bookkeeping)."""
    return (base if base is not None else job_dir()) / JOB_PRIVATE_DIR

# SPDX-License-Identifier: MIT
"""The jobs a launcher submitted for a sweep, written down the moment they exist.

A job id is the only handle on a cell that has not started (it has no directory yet).
``mushin_jobs.json`` in the sweep directory lists every job of the latest submission with
its overrides, so that ``status``, ``wait`` and ``cancel`` work from any shell, and a resume
refuses a second copy of a queued cell, even after the driver was detached or killed.

>>> import tempfile
>>> from pathlib import Path
>>> root = Path(tempfile.mkdtemp())
>>> record_submission(root, "slurm", [("7_0", ["lr=0.1"]), ("7_1", ["lr=1.0"])])
>>> [job["job_id"] for job in read_submission(root)["jobs"]]
['7_0', '7_1']
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.layout import JOBS_FILE
from mushin_box._core.sidecars import read_json, timestamp, write_json_atomic
from mushin_box._slurm.jobs import valid_job_id


def record_submission(
    sweep_dir: str | os.PathLike[str],
    cluster: str,
    jobs: Sequence[tuple[str, Sequence[str]]],
    *,
    detached: bool = False,
) -> None:
    """Write the jobs just submitted (``(job id, overrides)`` each) over the previous list,
    whose jobs have ended (one driver at a time; a resume waits for its cells' jobs), except
    those marked ``carried`` (:func:`carry_jobs`), which stay listed."""
    previous = read_submission(sweep_dir)
    carried = [
        entry
        for entry in previous.get("jobs", ())
        if isinstance(entry, dict)
        and entry.get("carried") is True
        and previous.get("cluster") == cluster
    ]
    record = {
        "schema": 1,
        "cluster": cluster,
        "host": socket.gethostname(),
        "submitted": timestamp(),
        "detached": detached,
        "jobs": [*carried, *({"job_id": str(job), "overrides": list(o)} for job, o in jobs)],
    }
    write_json_atomic(Path(sweep_dir) / JOBS_FILE, record)


def carry_jobs(
    sweep_dir: str | os.PathLike[str], submission: Mapping[str, Any], live: Sequence[str]
) -> None:
    """Mark the ``live`` jobs of ``submission`` ``carried`` (kept through the next
    submission, which leaves their cells alone); drop the others."""
    live_ids = set(live)
    keep = [
        {**entry, "carried": True}
        for entry in submission.get("jobs", ())
        if isinstance(entry, dict) and str(entry.get("job_id")) in live_ids
    ]
    write_json_atomic(Path(sweep_dir) / JOBS_FILE, {**submission, "jobs": keep})


def read_submission(sweep_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The latest submission (``{}`` when none was recorded or it can't be read)."""
    data = read_json(Path(sweep_dir) / JOBS_FILE)
    return data if isinstance(data, dict) and isinstance(data.get("jobs"), list) else {}


def checked_job_ids(
    submission: Mapping[str, Any], cluster: str = "slurm"
) -> tuple[list[str], list[str]]:
    """The job ids of a submission made on ``cluster``, and a line for each entry left
    out: the file sits in a shared directory, so only ``{"job_id": "<a SLURM job id>"}``
    entries are used.

    >>> ids, bad = checked_job_ids({"cluster": "slurm", "jobs": [
    ...     {"job_id": "7_0"}, {"job_id": "--name=x"}, {"job_id": 8}, ["9"]]})
    >>> ids, len(bad)
    (['7_0'], 3)
    """
    if submission.get("cluster") != cluster:
        return [], []
    ids, bad = [], []
    for entry in submission.get("jobs", ()):
        job = entry.get("job_id") if isinstance(entry, dict) else None
        if valid_job_id(job) if cluster == "slurm" else isinstance(job, str):
            ids.append(str(job))
        else:
            shown = repr(entry)[:80]
            bad.append(f"{JOBS_FILE}: {shown} is not a job entry with a SLURM job id; ignored")
    return ids, bad


def job_ids(submission: Mapping[str, Any], cluster: str = "slurm") -> list[str]:
    """The valid job ids of a submission (:func:`checked_job_ids`) made on ``cluster``."""
    return checked_job_ids(submission, cluster)[0]

# SPDX-License-Identifier: MIT
"""SLURM job states, once: which states are live, which are ended, and how to ask.

Every decision about a job (may this cell still produce a result? may a resume start it
again? is a ``running`` cell abandoned?) reads :data:`LIVE_STATES` and
:data:`ENDED_STATES` here, so the launcher and the sweep cannot disagree.

``PREEMPTED`` is an *ended* state, as SLURM defines it (``squeue(1)``, JOB STATE CODES:
"terminated due to preemption"). A job that is preempted and requeued, by
``PreemptMode=REQUEUE`` or by mushin-box's own requeue trap, shows as ``REQUEUED`` or
``PENDING`` instead, which are live.

Examples
--------
>>> is_live("RUNNING"), is_live("PREEMPTED"), is_live("CANCELLED by 1000")
(True, False, False)
>>> LIVE_STATES & ENDED_STATES
frozenset()
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = [
    "ENDED_STATES",
    "JOB_ID_BASH",
    "LIVE_STATES",
    "base_state",
    "is_live",
    "job_state",
    "job_states",
    "slurm_job_id",
]

#: a job in one of these states may still run (or run again) a cell
LIVE_STATES = frozenset(
    "PENDING RUNNING REQUEUED REQUEUE_HOLD REQUEUE_FED CONFIGURING COMPLETING SUSPENDED "
    "STOPPED RESIZING SIGNALING STAGE_OUT RESV_DEL_HOLD SPECIAL_EXIT".split()
)
#: a job in one of these states will not run again by itself
ENDED_STATES = frozenset(
    "BOOT_FAIL CANCELLED COMPLETED DEADLINE FAILED NODE_FAIL OUT_OF_MEMORY PREEMPTED "
    "REVOKED TIMEOUT".split()
)


#: :func:`slurm_job_id` as bash, for the batch script's requeue trap (sets ``job``)
JOB_ID_BASH = (
    "job=$SLURM_JOB_ID; [[ -n ${SLURM_ARRAY_TASK_ID:-} ]] && "
    "job=${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID"
)


def slurm_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """This process's SLURM job as squeue, scancel and scontrol name it: ``<array
    job>_<task>`` for an array task (the plain SLURM_JOB_ID of an array's last task is the
    whole array's id, so ``scontrol requeue`` of it would requeue every task), else the id.
    :data:`JOB_ID_BASH` is the same rule for the batch script.

    Examples
    --------
    >>> slurm_job_id({"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "2"})
    '10_2'
    >>> slurm_job_id({"SLURM_JOB_ID": "12"}), slurm_job_id({}) is None
    ('12', True)
    """
    env = os.environ if environ is None else environ
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return env.get("SLURM_JOB_ID") or None


def base_state(text: str) -> str:
    """The state word of what ``squeue``/``sacct``/submitit print (``CANCELLED by 1000``).

    Examples
    --------
    >>> base_state("cancelled by 1000"), base_state(" RUNNING\\n")
    ('CANCELLED', 'RUNNING')
    """
    words = text.split()
    return words[0].upper().rstrip("+") if words else ""


def is_live(state: str) -> bool:
    """May a job in ``state`` (as printed, e.g. ``"CANCELLED by 0"``) still run a cell?"""
    return base_state(state) in LIVE_STATES


def job_state(job_id: str, *, timeout_s: float = 15.0) -> str | None:
    """The state of a SLURM job (``"RUNNING"``, ``"CANCELLED"``, ``"TIMEOUT"``, ...), from
    ``squeue`` while it is queued or running and ``sacct`` after; ``None`` if unknown
    (no SLURM tools, or the job is unknown to both)."""
    return job_states([job_id], timeout_s=timeout_s).get(str(job_id))


def _ask(argv: list[str], timeout_s: float) -> list[tuple[str, str]]:
    """(job id, state) pairs printed by one ``squeue``/``sacct`` call ("id|state" lines)."""
    import shutil
    import subprocess

    if shutil.which(argv[0]) is None:
        return []
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    pairs = []
    for line in out.splitlines():
        job, _, state = line.strip().partition("|")
        if job and state:
            pairs.append((job, base_state(state)))
    return pairs


def job_states(job_ids: Iterable[str], *, timeout_s: float = 15.0) -> dict[str, str]:
    """The states of many SLURM jobs in one ``squeue`` and at most one ``sacct`` call
    (a status of a 500-cell sweep must not run 1,000 commands); jobs unknown to both, or
    every job when SLURM's tools are missing, are left out.

    An array task is asked by its own id (``123_4``). squeue prints a pending array as one
    line (``123_[4-9%2]``) and sacct does not know its tasks before they start, so squeue is
    asked for one line per task (``-r``).
    """
    wanted = sorted({str(j) for j in job_ids if str(j)})
    if not wanted:
        return {}
    found: dict[str, str] = {}
    squeue = ["squeue", "-h", "-r", "-j", ",".join(wanted), "-o", "%i|%T"]
    for job, state in _ask(squeue, timeout_s):
        if job in wanted:
            found[job] = state
    rest = [j for j in wanted if j not in found]
    if rest:
        sacct = ["sacct", "-X", "-n", "-P", "-j", ",".join(rest), "-o", "JobID,State"]
        for job, state in _ask(sacct, timeout_s):
            if job in rest:
                found[job] = state  # the last line of a job is its latest (requeued) run
    return found

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

__all__ = ["ENDED_STATES", "LIVE_STATES", "base_state", "is_live", "job_state"]

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
    import shutil
    import subprocess

    queries = (
        ["squeue", "-h", "-j", str(job_id), "-o", "%T"],
        ["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "State"],
    )
    for argv in queries:
        if shutil.which(argv[0]) is None:
            continue
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        if lines:
            return base_state(lines[-1])
    return None

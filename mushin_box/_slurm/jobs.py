# SPDX-License-Identifier: MIT
"""SLURM job states and ids, once, so the launcher and the sweep cannot disagree.

A scheduler that cannot be asked answers :data:`UNKNOWN` (in neither list), never "not
found": a job it cannot see may still run, and reading silence as "ended" would start a
second copy. ``PREEMPTED`` is *ended*, as SLURM defines it; a preempted job that is
requeued shows as ``REQUEUED`` or ``PENDING``, which are live.

>>> is_live("RUNNING"), is_live("PREEMPTED"), is_live("CANCELLED by 1000")
(True, False, False)
>>> LIVE_STATES & ENDED_STATES, UNKNOWN in LIVE_STATES | ENDED_STATES
(frozenset(), False)
>>> valid_job_id("123_[4-9%2]"), valid_job_id("--name=x"), valid_job_id(123)
(True, False, False)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from urllib.parse import quote

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

#: the answer for a job when the scheduler could not be asked (neither live nor ended)
UNKNOWN = "UNKNOWN"

#: squeue's pending reasons (``%r``) that only a change by the user or an administrator
#: ends (``Priority``, ``JobHeldUser`` and per-user limits pass with time or a release)
NEVER_START_REASONS = frozenset(
    "PartitionConfig PartitionNodeLimit PartitionTimeLimit AccountNotAllowed QOSNotAllowed "
    "InvalidAccount InvalidQOS BadConstraints DependencyNeverSatisfied "
    "ReqNodeNotAvail".split()
)
#: the QOS and association limits of one job (``QOSMaxGRESPerJob``, ``QOSMinGRES``, ...)
_PER_JOB_LIMIT = re.compile(r"\A(?:QOS|Assoc)(?:Max\w*PerJob\w*|Min\w+)\Z")

#: a job id: digits, an array task (``_4``) or pending range (``_[4-9%2]``), a het part (``+1``)
_JOB_ID = re.compile(r"\A[0-9]{1,12}(?:_(?:[0-9]{1,9}|\[[0-9,%\-]{1,64}\]))?(?:\+[0-9]{1,4})?\Z")


def valid_job_id(job: object) -> bool:
    """Is ``job`` a SLURM job id (a str)? Ids from sidecars must not reach ``scancel`` as an
    option (``--name=x``)."""
    return isinstance(job, str) and _JOB_ID.match(job) is not None


#: :func:`slurm_job_id` as bash, for the batch script's requeue trap (sets ``job``)
JOB_ID_BASH = (
    "job=$SLURM_JOB_ID; [[ -n ${SLURM_ARRAY_TASK_ID:-} ]] && "
    "job=${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID"
)


def slurm_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """This process's SLURM job as squeue and scancel name it: ``<array job>_<task>`` for an
    array task (the plain id of an array's last task is the whole array's); as bash,
    :data:`JOB_ID_BASH`.

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

    >>> base_state("cancelled by 1000"), base_state(" RUNNING\\n")
    ('CANCELLED', 'RUNNING')
    """
    words = text.split()
    return words[0].upper().rstrip("+") if words else ""


def is_live(state: str) -> bool:
    """May a job in ``state`` (as printed, e.g. ``"CANCELLED by 0"``) still run a cell?"""
    return base_state(state) in LIVE_STATES


def name_job_ids(ids: Iterable[str], most: int = 10, sep: str = " ") -> str:
    """Job ids for a message: the first ``most``, and how many more.

    >>> name_job_ids([str(i) for i in range(12)], most=2)
    '0 1 and 10 more'
    """
    ids = list(ids)
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return sep.join(ids[:most]) + more


def never_starts(reason: str | None) -> bool:
    """Will a job pending for ``reason`` (squeue's ``%r``) never start as it is?
    ``ReqNodeNotAvail`` counts only when it names unavailable nodes (a reservation ends).

    >>> never_starts("PartitionNodeLimit"), never_starts("QOSMaxGRESPerJob")
    (True, True)
    >>> never_starts("Priority"), never_starts("JobHeldUser")
    (False, False)
    >>> never_starts("QOSMaxJobsPerUserLimit")  # waits for the user's other jobs
    False
    >>> never_starts("ReqNodeNotAvail, UnavailableNodes:gpu[1-4]")
    True
    >>> never_starts("ReqNodeNotAvail, Reserved for maintenance"), never_starts(None)
    (False, False)
    """
    if not reason:
        return False
    word = reason.split(",")[0].strip()
    if word == "ReqNodeNotAvail":
        return "UnavailableNodes:" in reason and not reason.rstrip().endswith(":")
    return word in NEVER_START_REASONS or _PER_JOB_LIMIT.match(word) is not None


def is_unknown(state: str | None) -> bool:
    """Did the scheduler not answer for this job (:data:`UNKNOWN`)?"""
    return state == UNKNOWN


def sweep_mark(sweep_dir: str | os.PathLike[str]) -> str:
    """The word a job of the sweep in ``sweep_dir`` carries in its ``--comment``, by which
    ``cancel`` knows the sweep's jobs (ids are reused; sidecars may be edited). Quoted: no
    space, comma or control character reaches the batch script.

    >>> sweep_mark("/runs/my sweep")
    'mushin-box-sweep=/runs/my%20sweep'
    """
    return "mushin-box-sweep=" + quote(os.path.abspath(os.fspath(sweep_dir)), safe="/")


def owned_by(comment: str, sweep_dir: str | os.PathLike[str]) -> bool:
    """Is the last word of a job's comment (``squeue -o %k``) the :func:`sweep_mark` of
    ``sweep_dir``?

    >>> owned_by("nightly mushin-box-sweep=/runs/a", "/runs/a"), owned_by("", "/runs/a")
    (True, False)
    >>> owned_by("mushin-box-sweep=/runs/ab", "/runs/a")
    False
    """
    words = comment.split()
    return bool(words) and words[-1] == sweep_mark(sweep_dir)


def marked_jobs(
    sweep_dir: str | os.PathLike[str], *, timeout_s: float = 15.0
) -> dict[str, str] | None:
    """``{job id: state}`` of the user's queued or running jobs with the mark of the sweep in
    ``sweep_dir``, which alone names the jobs of a submission killed before recording them;
    None when squeue did not answer."""
    rows = _ask(["squeue", "-h", "-r", "--me", "-o", "%i|%T|%k"], timeout_s)
    if rows is None:
        return None
    return {r[0]: r[1] for r in rows if owned_by("|".join(r[2:]), sweep_dir)}


def job_state(job_id: str, *, timeout_s: float = 15.0) -> str | None:
    """The state of one SLURM job (:func:`job_states`); None when it is not known."""
    return job_states([job_id], timeout_s=timeout_s).get(str(job_id))


def _ask(argv: list[str], timeout_s: float) -> list[tuple[str, ...]] | None:
    """The ``|``-separated fields of each line ``argv`` prints, or None when it did not
    answer. "Invalid job id specified" (``squeue -j`` of forgotten ids) is an answer: none."""
    conf = os.environ.get("SLURM_CONF")  # missing: the tools would retry for a minute
    if (conf and not os.path.isfile(conf)) or shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return [] if "invalid job id" in done.stderr.lower() else None
    rows = []
    for line in done.stdout.splitlines():
        fields = tuple(line.strip().split("|"))
        if len(fields) >= 2 and fields[0] and fields[1]:
            rows.append((fields[0], base_state(fields[1]), *fields[2:]))
    return rows


#: an array task's id: its array's id, ``_``, the task's index
_ARRAY_TASK = re.compile(r"\A([0-9]+)_[0-9]+\Z")


def asked_ids(job_ids: Iterable[str]) -> str:
    """The ``-j`` list for squeue (``-r``) and sacct: an array task by its array's id (the
    caller keeps the lines it wants), so 10,000 cells are not one argument over 128 KiB.

    >>> asked_ids(["12_3", "12_4", "9", "13_0", "14_[1-3]"])
    '12,13,14_[1-3],9'
    """
    return ",".join(sorted({(m.group(1) if (m := _ARRAY_TASK.match(j)) else j) for j in job_ids}))


#: the longest array expression :func:`scancel_args` writes (SLURM 22.05 cancelled a task it
#: did not name in one of ~1,900 characters)
SCANCEL_EXPRESSION_CHARS = 500


def number_ranges(numbers: Iterable[int]) -> list[str]:
    """Numbers, sorted, as runs of consecutive ones: SLURM's and the kit's ``0-3,5``.

    >>> number_ranges([5, 3, 0, 1, 2])
    ['0-3', '5']
    """
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return [f"{a}-{b}" if b > a else str(a) for a, b in runs]


def scancel_args(job_ids: Iterable[str]) -> list[str]:
    """``job_ids`` as ``scancel``'s arguments: the tasks of one array as one expression
    (``12_[0-3,5]``) of at most :data:`SCANCEL_EXPRESSION_CHARS`; other ids as they are.
    Never a whole array for some of its tasks.

    >>> scancel_args(["12_3", "12_0", "12_1", "12_2", "12_5", "9", "13_7"])
    ['12_[0-3,5]', '13_7', '9']
    """
    tasks: dict[str, list[int]] = {}
    others: list[str] = []
    for job in dict.fromkeys(job_ids):
        m = _ARRAY_TASK.match(job)
        if m:
            tasks.setdefault(m.group(1), []).append(int(job.partition("_")[2]))
        else:
            others.append(job)
    out: list[str] = []
    for array, numbers in sorted(tasks.items()):
        if len(numbers) == 1:
            out.append(f"{array}_{numbers[0]}")
            continue
        chunk: list[str] = []
        for item in number_ranges(numbers):  # each expression at most SCANCEL_EXPRESSION_CHARS long
            if chunk and len(array) + 3 + len(",".join([*chunk, item])) > SCANCEL_EXPRESSION_CHARS:
                out.append(f"{array}_[{','.join(chunk)}]")
                chunk = []
            chunk.append(item)
        out.append(f"{array}_[{','.join(chunk)}]")
    return out + sorted(others)


def scancel(job_ids: Iterable[str]) -> str | None:
    """Cancel ``job_ids`` (as :func:`scancel_args`, after ``--`` so that no id is read as an
    option); return why ``scancel`` could not be run, or None."""
    argv = scancel_args(job_ids)
    try:
        if argv:
            subprocess.run(["scancel", "--", *argv], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None


def job_states(
    job_ids: Iterable[str], *, timeout_s: float = 15.0, reasons: dict[str, str] | None = None
) -> dict[str, str]:
    """The states of many SLURM jobs from one ``squeue`` (``-r``: sacct does not know a
    pending array's tasks) and at most one ``sacct`` call; jobs neither knows are left out
    (all without SLURM's tools). squeue lists every live job, so a job it could not be
    asked about that sacct does not know is :data:`UNKNOWN`. Ids that are not job ids are
    never asked about. ``reasons`` gets squeue's reason (``%r``) for each job it shows
    waiting."""
    wanted = {j for j in job_ids if valid_job_id(j)}
    if not wanted or shutil.which("squeue") is None:
        return {}
    found: dict[str, str] = {}
    reasons = {} if reasons is None else reasons
    squeue = _ask(["squeue", "-h", "-r", "-j", asked_ids(wanted), "-o", "%i|%T|%r"], timeout_s)
    for job, state, *reason in squeue or ():
        if job in wanted:
            found[job] = state
            said = "|".join(reason).strip()
            if said and said != "None":  # a running job's reason is "None"
                reasons[job] = said
    rest = {j for j in wanted if j not in found}
    if rest:
        sacct_argv = ["sacct", "-X", "-n", "-P", "-j", asked_ids(rest), "-o", "JobID,State"]
        for job, state, *_ in _ask(sacct_argv, timeout_s) or ():
            if job in rest:
                found[job] = state  # the last line of a job is its latest (requeued) run
        if squeue is None:  # a live job is always in squeue's list: without it, unknown
            found.update({j: UNKNOWN for j in rest if j not in found})
    return found


def queued_jobs(
    job_ids: Iterable[str], *, timeout_s: float = 15.0
) -> dict[str, tuple[str, str, str]] | None:
    """``{job id: (state, comment, user)}`` of the jobs ``squeue`` shows now, or None when
    it did not answer. Only these may be cancelled: ids of ended jobs may be reused."""
    wanted = {j for j in job_ids if valid_job_id(j)}
    if not wanted:
        return {}
    rows = _ask(["squeue", "-h", "-r", "-j", asked_ids(wanted), "-o", "%i|%T|%u|%k"], timeout_s)
    if rows is None:
        return None  # the comment last: it may hold a "|"
    return {r[0]: (r[1], "|".join(r[3:]), r[2]) for r in rows if r[0] in wanted and len(r) > 2}

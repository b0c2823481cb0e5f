# SPDX-License-Identifier: MIT
"""Is there a SLURM cluster to submit to? A bounded probe, not a guess from ``PATH``.

``sbatch`` on ``PATH`` only says that the SLURM client is installed: a workstation or a
container often has it with no cluster configured, and ``sbatch`` then fails after the sweep
has started ("Could not establish a configuration source"). So a launch asks the
controller: ``scontrol ping`` answers at once when a controller is configured
(exit 0, "... is UP"), fails at once when no configuration can be found, and fails with
"DOWN" after its connect timeout when the controller does not answer. A missing
``SLURM_CONF`` file makes every client retry for a minute, so that case is answered
without running anything, and the probe has a hard timeout.

The account check (``scontrol show config``, ``sacctmgr``) serves the dry run's review only:
both are bounded too, and any failure means "unknown", never an error.
"""

from __future__ import annotations

import functools
import getpass
import os
import re
import shutil
import subprocess
from pathlib import Path

import attrs

__all__ = [
    "AccountCheck",
    "PartitionCapacity",
    "SbatchRefusal",
    "SlurmProbe",
    "account_check",
    "partition_capacity",
    "sbatch_test_only",
    "nv_without_gpus",
    "probe_slurm",
    "sbatch_refused",
    "scontrol_config",
]

PROBE_TIMEOUT_S = 5.0


@attrs.frozen
class SlurmProbe:
    """The probe's answer: whether a controller answered, and why (one line, for banners)."""

    reachable: bool
    reason: str


def _first_line(text: str) -> str:
    """The line of a SLURM client's output that says what is wrong: a ``fatal:`` line if
    there is one (the earlier ``error:`` lines are its symptoms), else the first line."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if "fatal:" in line]
    line = (fatal or lines or ["no output"])[0]
    for prefix in ("scontrol: ", "sinfo: ", "sbatch: "):
        line = line.removeprefix(prefix)
    return line.removeprefix("fatal: ").removeprefix("error: ")


def probe_slurm(timeout_s: float = PROBE_TIMEOUT_S) -> SlurmProbe:
    """Ask the SLURM controller whether it is up (``scontrol ping``, at most ``timeout_s``).

    Examples
    --------
    >>> probe = probe_slurm()
    >>> isinstance(probe.reachable, bool) and bool(probe.reason)
    True
    """
    return _probe(float(timeout_s), os.environ.get("SLURM_CONF"), os.environ.get("PATH"))


@functools.lru_cache(maxsize=4)
def _probe(timeout_s: float, slurm_conf: str | None, path: str | None) -> SlurmProbe:
    if shutil.which("sbatch", path=path) is None:
        return SlurmProbe(False, "no sbatch on PATH")
    if slurm_conf and not os.path.isfile(slurm_conf):
        return SlurmProbe(False, f"SLURM_CONF={slurm_conf} is not a file")
    scontrol = shutil.which("scontrol", path=path)
    if scontrol is None:
        return SlurmProbe(False, "sbatch is on PATH, but no scontrol to ask the controller with")
    try:
        proc = subprocess.run(
            [scontrol, "ping"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return SlurmProbe(False, f"`scontrol ping` gave no answer within {timeout_s:g} s")
    except OSError as exc:
        return SlurmProbe(False, f"`scontrol ping` could not run: {exc}")
    said = _first_line(proc.stdout + "\n" + proc.stderr)
    if proc.returncode == 0 and " UP" in proc.stdout:
        return SlurmProbe(True, f"scontrol ping: {said}")
    return SlurmProbe(False, f"scontrol ping: {said}")


@attrs.frozen
class AccountCheck:
    """What the cluster says about charging a job that names no account.

    ``enforced``: the cluster enforces associations (``AccountingStorageEnforce``), so a job
    must run under an account the user has; ``default``: the user's default account, which
    such a job is charged to (None: the user has none, or it could not be asked).
    """

    enforced: bool | None
    default: str | None


def _run(argv: list[str], timeout_s: float) -> str | None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def scontrol_config(timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """The cluster's configuration as ``scontrol show config`` prints it (bounded by
    ``timeout_s``), or None when it could not be asked."""
    scontrol = shutil.which("scontrol")
    return _run([scontrol, "show", "config"], timeout_s) if scontrol else None


def account_check(timeout_s: float = PROBE_TIMEOUT_S) -> AccountCheck:
    """Does the cluster require an account, and what is the user's default one?

    ``scontrol show config`` says whether associations are enforced; only
    then is ``sacctmgr`` asked for the default account. Unknown answers are None.
    """
    enforced: bool | None = None
    text = scontrol_config(timeout_s)
    for line in (text or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageEnforce":
            # limits, qos and safe each imply associations (slurm.conf(5))
            words = {w.strip() for w in value.lower().split(",")}
            enforced = bool(words & {"associations", "limits", "qos", "safe"})
    if not enforced:
        return AccountCheck(enforced, None)
    sacctmgr = shutil.which("sacctmgr")
    user = getpass.getuser()
    argv = [sacctmgr or "sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"]
    out = _run(argv, timeout_s) if sacctmgr else None
    default = (out or "").strip().splitlines()[0].strip() if (out or "").strip() else None
    return AccountCheck(True, default or None)


# what SLURM's clients say when they find no cluster (not a refusal of this job's options)
_NO_CLUSTER = (
    "configuration source",
    "Unable to contact slurm controller",
    "Unable to process configuration file",
)


@attrs.frozen
class SbatchRefusal:
    """Why sbatch did not queue a job: its own words on one line, and whether it found no
    cluster at all (rather than refusing this job's options)."""

    said: str
    no_cluster: bool


def sbatch_refused(exc: BaseException) -> SbatchRefusal | None:
    """What sbatch said when it refused to queue a job; None when ``exc`` is anything else.

    submitit raises ``FailedJobError(stderr)`` from the ``CalledProcessError`` of its
    ``sbatch`` call, and sbatch's stderr says why (``sbatch: error: invalid partition
    specified: nope``). That is input the user can fix, not a crash: sbatch's own words,
    without their prefix, on one line (a ``fatal:`` line alone, when there is one: the
    other lines lead there). Only sbatch's own stderr is read, never submitit's message.
    """
    cause = exc.__cause__
    if not isinstance(cause, subprocess.CalledProcessError):
        return None
    argv = cause.cmd if isinstance(cause.cmd, list | tuple) else str(cause.cmd).split()
    if not argv or Path(str(argv[0])).name != "sbatch":
        return None
    stderr = cause.stderr if isinstance(cause.stderr, str) else ""
    if isinstance(cause.stderr, bytes):
        stderr = cause.stderr.decode(errors="replace")
    fatal = [line for line in stderr.splitlines() if re.match(r"^sbatch:\s*fatal:", line.strip())]
    lines = [
        re.sub(r"^sbatch:\s*((error|fatal):\s*)?", "", line.strip())
        for line in (fatal or stderr.splitlines())
    ]
    said = "; ".join(line for line in lines if line) or f"exit status {cause.returncode}"
    return SbatchRefusal(said, any(sign in stderr for sign in _NO_CLUSTER))


def nv_without_gpus(partition: str | None, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``--nv`` is wasted on ``partition`` (None: its nodes have GPUs, or it is unknown).

    ``--nv`` on a node without a GPU binds the host's GL/EGL libraries into every rank and
    says nothing: the job then runs on other libraries than a GPU node's. ``sinfo``'s GRES
    column (``gpu:4``, ``gpu:a100:8(S:0-1)``, ``(null)``) says whether any node of the
    partition (the default partition when None) has a GPU. Any failure to ask is unknown.

    Examples
    --------
    >>> _no_gpu_gres(["gpu:4", "(null)"]), _no_gpu_gres(["(null)", "tmpdisk:100"])
    (False, True)
    """
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        return None
    argv = [sinfo, "-h", "-o", "%G"] + (["-p", partition] if partition else [])
    out = _run(argv, timeout_s)
    lines = [line.strip() for line in (out or "").splitlines() if line.strip()]
    if not lines or not _no_gpu_gres(lines):
        return None
    where = f"partition {partition}" if partition else "the default partition"
    return (
        f"--nv on {where}, whose nodes have no GPU (sinfo GRES: {', '.join(sorted(set(lines)))}): "
        "Apptainer binds the host's GL/EGL libraries into every rank for nothing; choose a "
        "GPU partition, or pass nv=False to submitit_slurm_config"
    )


def _no_gpu_gres(lines: list[str]) -> bool:
    return not any(item.strip().startswith("gpu") for line in lines for item in line.split(","))


#: how long ``sbatch --test-only`` and ``sinfo`` may take (the controller answers in ms)
CHECK_TIMEOUT_S = 20.0


def _said(text: str) -> str:
    """SLURM's words, one line: each line without its client prefix, repeats dropped.

    Examples
    --------
    >>> _said("sbatch: error: invalid partition specified: gpu\\n"
    ...       "allocation failure: Invalid partition name specified\\n")
    'invalid partition specified: gpu; Invalid partition name specified'
    """
    lines: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"^(sbatch|sinfo):\s*((error|fatal):\s*)?", "", " ".join(raw.split()))
        line = line.removeprefix("allocation failure: ")
        if line and line not in lines:
            lines.append(line)
    return "; ".join(lines)


def sbatch_test_only(script: str, timeout_s: float = CHECK_TIMEOUT_S) -> tuple[bool | None, str]:
    """Ask the controller whether it would queue ``script`` (``sbatch --test-only``, which
    checks partition, nodes, GRES, time, account and qos against the cluster and submits
    nothing): ``(True, when it would start)``, ``(False, SLURM's reason on one line)``, or
    ``(None, why it could not be asked)``: a check that cannot run never blocks a launch.
    """
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        return None, "no sbatch on PATH"
    try:
        proc = subprocess.run(
            [sbatch, "--test-only"],
            input=script,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return None, f"`sbatch --test-only` gave no answer within {timeout_s:g} s"
    except OSError as exc:
        return None, f"`sbatch --test-only` could not run: {exc}"
    said = _said(proc.stderr + "\n" + proc.stdout)
    if proc.returncode == 0:
        return True, said
    if not said:  # sbatch refuses with its reason: silence is not an answer
        return None, f"`sbatch --test-only` exited {proc.returncode} and said nothing"
    if any(sign in said for sign in _NO_CLUSTER):
        return None, said
    return False, said


@attrs.frozen
class PartitionCapacity:
    """What ``sinfo`` says a partition holds: its name (the default one's when none was
    asked for), its nodes, and the most GPUs one of them has (0: none; None: the GRES
    column could not be read)."""

    partition: str
    nodes: int
    gpus_per_node: int | None


def partition_capacity(
    partition: str | None, timeout_s: float = CHECK_TIMEOUT_S
) -> PartitionCapacity | None:
    """The nodes and GPUs per node of ``partition`` (None: the default partition), from
    one ``sinfo -N`` call; None when sinfo is missing, fails, or knows no such partition
    (``sbatch --test-only`` says that one).

    Examples
    --------
    >>> _gpus("gpu:4"), _gpus("gpu:a100:8(S:0-1),tmpdisk:100"), _gpus("(null)"), _gpus("gpu")
    (4, 8, 0, None)
    """
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        return None
    argv = [sinfo, "-h", "-N", "-o", "%N|%P|%G"] + (["-p", partition] if partition else [])
    out = _run(argv, timeout_s)
    nodes: dict[str, int | None] = {}
    name = partition
    for line in (out or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        node, part, gres = parts
        if partition is None:  # the default partition is marked with a '*'
            if not part.endswith("*"):
                continue
            name = part.rstrip("*")
        gpus = _gpus(gres)
        known = nodes.get(node, 0)
        nodes[node] = None if gpus is None or known is None else max(known, gpus)
    if not nodes or name is None:
        return None
    counts = list(nodes.values())
    most = None if any(c is None for c in counts) else max(c for c in counts if c is not None)
    return PartitionCapacity(name, len(nodes), most)


def _gpus(gres: str) -> int | None:
    """The GPU count of one node's GRES column (``gpu:4``, ``gpu:a100:8(S:0-1)``,
    ``(null)``); None when a GPU entry gives no count."""
    total = 0
    for item in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", item.strip()).split(":")
        if fields[0] != "gpu":
            continue
        if len(fields) < 2 or not fields[-1].isdigit():
            return None
        total += int(fields[-1])
    return total

# SPDX-License-Identifier: MIT
"""Is there a SLURM cluster to submit to? ``sbatch`` on ``PATH`` only says the client is
installed, so a launch asks the controller (``scontrol ping``) with a hard timeout; a
missing ``SLURM_CONF`` file (every client would retry for a minute) answers at once. The
other questions (account, partition, ``sbatch --test-only``) serve the review: bounded, and
a failure means "unknown".
"""

from __future__ import annotations

import functools
import getpass
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs

PROBE_TIMEOUT_S = 5.0


@attrs.frozen
class SlurmProbe:
    """The probe's answer: whether a controller answered, and why (one line, for banners)."""

    reachable: bool
    reason: str


def probe_slurm(timeout_s: float = PROBE_TIMEOUT_S) -> SlurmProbe:
    """Ask the SLURM controller whether it is up (``scontrol ping``, at most ``timeout_s``).

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
    proc = _call([scontrol, "ping"], "scontrol ping", timeout_s, stdin=subprocess.DEVNULL)
    if isinstance(proc, str):
        return SlurmProbe(False, proc)
    # what is wrong: a fatal: line if there is one (the error: lines before it lead there)
    lines = [" ".join(x.split()) for x in f"{proc.stdout}\n{proc.stderr}".splitlines() if x.strip()]
    said = ([x for x in lines if "fatal:" in x] or lines or ["no output"])[0]
    for prefix in ("scontrol: ", "sinfo: ", "sbatch: ", "fatal: ", "error: "):
        said = said.removeprefix(prefix)
    return SlurmProbe(proc.returncode == 0 and " UP" in proc.stdout, f"scontrol ping: {said}")


@attrs.frozen
class AccountCheck:
    """Whether the cluster enforces associations (a job needs an account of the user's),
    and the user's default account, charged for a job that names none (None: unknown)."""

    enforced: bool | None
    default: str | None


def _call(
    argv: list[str], name: str, timeout_s: float, **kwargs: Any
) -> subprocess.CompletedProcess[str] | str:
    """``argv``'s completed process, or why it gave none (``name``: the command's words)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, **kwargs)
    except subprocess.TimeoutExpired:
        return f"`{name}` gave no answer within {timeout_s:g} s"
    except OSError as exc:
        return f"`{name}` could not run: {exc}"


def _run(argv: list[str], timeout_s: float) -> str | None:
    """``argv``'s output; None when it is not installed, did not answer or failed."""
    proc = _call(argv, "", timeout_s, stdin=subprocess.DEVNULL)
    return None if isinstance(proc, str) or proc.returncode != 0 else proc.stdout


def scontrol_config(timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """The cluster's configuration as ``scontrol show config`` prints it (bounded by
    ``timeout_s``), or None when it could not be asked."""
    return _run(["scontrol", "show", "config"], timeout_s)


def account_check(timeout_s: float = PROBE_TIMEOUT_S) -> AccountCheck:
    """``scontrol show config`` says whether associations are enforced; only then is
    ``sacctmgr`` asked for the default account."""
    enforced: bool | None = None
    for line in (scontrol_config(timeout_s) or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageEnforce":
            # limits, qos and safe each imply associations (slurm.conf(5))
            words = {w.strip() for w in value.lower().split(",")}
            enforced = bool(words & {"associations", "limits", "qos", "safe"})
    if not enforced:
        return AccountCheck(enforced, None)
    argv = ["sacctmgr", "-n", "-P", "show", "user", getpass.getuser(), "format=DefaultAccount"]
    lines = (_run(argv, timeout_s) or "").strip().splitlines()
    return AccountCheck(True, lines[0].strip() or None if lines else None)


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
    """What sbatch said, on one line without its prefixes (a ``fatal:`` line alone when there
    is one), when it refused to queue a job (the ``CalledProcessError`` that submitit's
    ``FailedJobError`` comes from); None when ``exc`` is anything else."""
    cause = exc.__cause__
    if not isinstance(cause, subprocess.CalledProcessError):
        return None
    argv = cause.cmd if isinstance(cause.cmd, list | tuple) else str(cause.cmd).split()
    if not argv or Path(str(argv[0])).name != "sbatch":
        return None
    stderr = cause.stderr if isinstance(cause.stderr, str) else ""
    stderr = cause.stderr.decode(errors="replace") if isinstance(cause.stderr, bytes) else stderr
    fatal = [line for line in stderr.splitlines() if re.match(r"^sbatch:\s*fatal:", line.strip())]
    lines = [
        re.sub(r"^sbatch:\s*((error|fatal):\s*)?", "", line.strip())
        for line in (fatal or stderr.splitlines())
    ]
    said = "; ".join(line for line in lines if line) or f"exit status {cause.returncode}"
    return SbatchRefusal(said, any(sign in stderr for sign in _NO_CLUSTER))


def nv_without_gpus(partition: str | None, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``--nv`` is wasted on ``partition`` (None: a node has a GPU, or it is unknown):
    without a GPU it silently binds the host's GL/EGL libraries into every rank.

    >>> _no_gpu_gres(["gpu:4", "(null)"]), _no_gpu_gres(["(null)", "tmpdisk:100"])
    (False, True)
    """
    argv = ["sinfo", "-h", "-o", "%G"] + (["-p", partition] if partition else [])
    lines = [line.strip() for line in (_run(argv, timeout_s) or "").splitlines() if line.strip()]
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
    """Would the controller queue ``script`` (``sbatch --test-only``, which submits
    nothing)? ``(True, when it would start)``, ``(False, SLURM's reason)``, or ``(None, why
    it could not be asked)``: a check that cannot run never blocks a launch.
    """
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        return None, "no sbatch on PATH"
    proc = _call([sbatch, "--test-only"], "sbatch --test-only", timeout_s, input=script)
    if isinstance(proc, str):
        return None, proc
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
    """A partition's name, its nodes, and the most GPUs one of them has (None: unread)."""

    partition: str
    nodes: int
    gpus_per_node: int | None


def partition_capacity(
    partition: str | None, timeout_s: float = CHECK_TIMEOUT_S
) -> PartitionCapacity | None:
    """The nodes and GPUs per node of ``partition`` (None: the default one) from ``sinfo
    -N``; None when sinfo is missing, fails, or knows no such partition.

    >>> _gpus("gpu:4"), _gpus("gpu:a100:8(S:0-1),tmpdisk:100"), _gpus("(null)"), _gpus("gpu")
    (4, 8, 0, None)
    """
    argv = ["sinfo", "-h", "-N", "-o", "%N|%P|%G"] + (["-p", partition] if partition else [])
    nodes: dict[str, int | None] = {}
    name = partition
    for line in (_run(argv, timeout_s) or "").splitlines():
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
    """The GPU count of one node's GRES column; None when a GPU entry gives no count."""
    total = 0
    for item in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", item.strip()).split(":")
        if fields[0] != "gpu":
            continue
        if len(fields) < 2 or not fields[-1].isdigit():
            return None
        total += int(fields[-1])
    return total

# SPDX-License-Identifier: MIT
"""Is the process or SLURM job that a ``running`` cell names as its owner still alive?

A cell records its owner when it starts (:func:`owner_fields`); another process reads it
back (:func:`owner_of`) and asks :func:`check`, so that a sweep started again runs a cell
whose owner is gone and never a second copy of one that still runs:

* a process on this host is alive if its pid exists, is not a zombie, and started when the
  recorded one did (``/proc/<pid>/stat`` field 22 and the boot id: pids are reused);
  without ``/proc`` (macOS), the pid alone;
* a SLURM job is alive while ``squeue``/``sacct`` show it live; one neither knows is over;
  no answer is *unknown*, counted alive. The checker's own job (a local sweep inside
  ``salloc``) says nothing of the cell: the process is checked instead;
* another host's process with no job, or a job with no SLURM tools here, cannot be
  checked: it counts as alive, and the caller says how to go on.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import STATUS_FILE, TORCHRUN_AGENT_ENV
from mushin_box._slurm.jobs import is_live, is_unknown, slurm_job_id
from mushin_box._slurm.jobs import job_state as ask_slurm

_PROC = Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from field 3 (state) on, else None (no process)."""
    text = _read(_PROC / str(pid) / "stat")
    if text is None:
        return None
    # field 2 (comm) is in parentheses and may hold spaces and parentheses itself
    return text[text.rfind(")") + 2 :].split()


def process_start(pid: int) -> str | None:
    """``<boot id>:<start time in clock ticks>`` of a process, else None (no ``/proc``, or
    no such process): the same pid with another start is another process."""
    fields = _stat_fields(pid)
    boot = _read(_PROC / "sys/kernel/random/boot_id")
    if fields is None or boot is None or len(fields) < 20:
        return None
    return f"{boot.strip()}:{fields[19]}"  # field 22, starttime


def owner_fields() -> dict[str, Any]:
    """The status fields that name this process as a cell's owner: under torchrun, its
    agent, since ``cancel`` signals the owner and a worker stopped alone would be
    restarted by its agent."""
    pid = os.getpid()
    agent = os.environ.get(TORCHRUN_AGENT_ENV, "")
    if agent.isdigit() and int(agent) == os.getppid():  # still this worker's parent
        pid = int(agent)
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "pid_start": process_start(pid),
        "slurm_job_id": slurm_job_id(),
    }


@attrs.frozen
class Owner:
    """Who runs a cell, as its status recorded it (any part may be unknown)."""

    host: str | None = None
    pid: int | None = None
    pid_start: str | None = None
    slurm_job: str | None = None

    def describe(self) -> str:
        """The owner in words, as a message names it."""
        if self.slurm_job:
            return f"SLURM job {self.slurm_job}"
        return f"process {self.pid} on {self.host}"


@attrs.frozen
class Liveness:
    """The answer of :func:`check`: alive or not, why, and the job's state when asked.
    ``unknown``: the scheduler did not answer (``alive`` is then True: it may run)."""

    alive: bool
    reason: str
    job_state: str | None = None
    unknown: bool = False


def owner_of(status: Mapping[str, Any]) -> Owner | None:
    """The owner a cell's status record names, or None when it names none (an old status).

    >>> owner_of({"host": "n1", "pid": 42, "slurm_job_id": "7_1"})
    Owner(host='n1', pid=42, pid_start=None, slurm_job='7_1')
    >>> owner_of({"status": "running"}) is None
    True
    """
    pid = status.get("pid")
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
    host = status.get("host") if isinstance(status.get("host"), str) else None
    start = status.get("pid_start") if isinstance(status.get("pid_start"), str) else None
    job = status.get("slurm_job_id")
    job = str(job) if isinstance(job, str | int) and not isinstance(job, bool) and job else None
    if job is None and (pid is None or host is None):
        return None
    return Owner(host=host, pid=pid, pid_start=start, slurm_job=job)


def same_process(pid: int, start: str | None) -> bool:
    """Is ``pid`` the process a record names with its start (:func:`process_start`)? Only
    then may it be signalled; never pid 1 or below, this process, or an ancestor."""
    if not isinstance(start, str) or not start or pid <= 1 or pid in _ancestors():
        return False
    return pid_alive(pid) and process_start(pid) == start


def process_uid(pid: int) -> int | None:
    """The user id process ``pid`` runs as (the owner of ``/proc/<pid>``), else None."""
    try:
        return os.stat(_PROC / str(pid)).st_uid
    except OSError:
        return None


def _ancestors() -> set[int]:
    """This process and every process above it (from ``/proc``; else the parent)."""
    found, pid = {os.getpid()}, os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 2:
            break
        pid = int(fields[1])
    return found


def pid_alive(pid: int) -> bool:
    """Is process ``pid`` of this host alive? A zombie is not. Without ``/proc`` (macOS),
    the pid alone is checked."""
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[0] not in ("Z", "X")
    if _PROC.is_dir():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant of it alive now (from ``/proc``; just ``pid`` without
    it)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(e) for e in os.listdir(_PROC) if e.isdigit()]
    except OSError:
        return [pid]
    for entry in entries:
        fields = _stat_fields(entry)
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(entry)
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def _process(owner: Owner) -> Liveness:
    """A process on this host: alive unless gone, a zombie, or its pid was reused."""
    pid = owner.pid
    assert pid is not None
    where = f"process {pid} on {owner.host}"
    if pid == os.getpid():  # this process is here, checking: it runs no cell any more
        return Liveness(False, f"{where} (this process) was interrupted while running it")
    if not pid_alive(pid):
        return Liveness(False, f"{where} died while running it")
    if owner.pid_start is not None and process_start(pid) != owner.pid_start:
        return Liveness(False, f"{where} died while running it (its pid now names another)")
    return Liveness(True, f"{where} is running")


def _job(owner: Owner, ask: Callable[[str], str | None]) -> Liveness | None:
    """A SLURM job, or None when SLURM's tools are missing here (cannot tell)."""
    job = str(owner.slurm_job)
    state = ask(job)
    if is_unknown(state):
        return Liveness(True, f"SLURM job {job}: the scheduler did not answer", None, True)
    if state is None:
        if shutil.which("squeue") is None:
            return None
        return Liveness(False, f"SLURM job {job} ended (squeue and sacct do not know it)")
    if is_live(state):
        return Liveness(True, f"SLURM job {job} is {state}", state)
    return Liveness(False, f"SLURM job {job} ended {state} while the cell was running", state)


def check(owner: Owner | None, *, job_state: Callable[[str], str | None] | None = None) -> Liveness:
    """Is ``owner`` (None: not alive) alive? See the module doc. ``job_state``: asks SLURM
    for a job's state (a caller checking many cells passes a cached one)."""
    if owner is None:
        return Liveness(False, "its status names no process or job")
    why = "it runs on another host, which cannot be checked from here"
    if owner.slurm_job and owner.slurm_job != slurm_job_id():
        answer = _job(owner, job_state or ask_slurm)
        if answer is not None:
            return answer
        why = "no SLURM tools here to ask about it"
    if owner.host == socket.gethostname() and owner.pid is not None:
        return _process(owner)
    return Liveness(True, f"{owner.describe()} may still be running ({why})")


def still_running_message(busy: Sequence[tuple[str, Owner]]) -> str:
    """One line refusing to start cells that still run: which, who runs them, and how to
    stop them: ``mushin-box cancel``, never a bare ``kill``/``scancel``, since a pid or job
    id read from a status may be another's by now, which ``cancel`` checks."""
    cells = " ".join(shlex.quote(cell) for cell, _ in busy)
    text = (
        "cells of this sweep are still running: "
        + ", ".join(f"{cell} ({owner.describe()})" for cell, owner in busy)
        + f"; wait for them to end, or stop them with `mushin-box cancel <sweep dir> {cells}`"
        + " (it checks that each process and job is this sweep's), then run again"
    )
    here = socket.gethostname()
    if any(owner.slurm_job is None and owner.host != here for _, owner in busy):
        text += (
            f" (another host's process cannot be checked from {here}: cancel or run again "
            f"there, or, if it is gone, delete that cell's {STATUS_FILE})"
        )
    return text

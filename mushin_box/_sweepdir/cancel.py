# SPDX-License-Identifier: MIT
"""Stop cells of a sweep from the sidecars alone (any login node for SLURM cells, the cell's
host for local ones): ``scancel`` or signals, then ``cancelled`` once the owner is gone.

Order: a completed cell is never touched (SLURM may reuse its job id). A local cell gets
SIGTERM (rank 0 stops its ranks, its checkpoint stays whole), then after ``grace_s``
SIGKILL to its tree as read before the first signal. The status, re-read just before, is
written once the owner is gone: ``completed`` meanwhile stays; a ``failed`` its dying
process wrote becomes ``cancelled``. A cell that never started is marked ``cancelled`` in
the manifest once the sweep's jobs left the queue and no driver holds its lock; one started
meanwhile is settled like a running cell.

Trust: a sidecar may name any process or job. A job is cancelled only while ``squeue``
shows it with this sweep's mark (:func:`mushin_box._slurm.jobs.sweep_mark`) run by the
sweep's owner; a process only when its start time is the recorded one (never pid 1, this
process or an ancestor) and it runs as the owner (the invoking user; as root, the
directory's owner); a status or jobs file only when it and its directory are the owner's
alone to write. Each refusal is named in :attr:`CancelReport.refused`; nothing refused is
waited for.
"""

from __future__ import annotations

import getpass
import os
import pwd
import signal
import socket
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import JOBS_FILE, STATUS_FILE, read_limit
from mushin_box._core.safeio import open_regular_stat
from mushin_box._core.sidecars import loads, read_json, timestamp, write_json_atomic
from mushin_box._core.targets import public
from mushin_box._core.userfile import writable_by_others
from mushin_box._slurm.jobs import (
    is_live,
    is_unknown,
    job_states,
    name_job_ids,
    owned_by,
    queued_jobs,
    scancel,
    scancel_args,  # an array's tasks: one expression
    valid_job_id,
)
from mushin_box._slurm.submitted import checked_job_ids
from mushin_box._sweepdir.board import (
    CellView,
    driver_running,
    job_runs_cell,
    owner_gone,
    read_sweep,
)
from mushin_box._sweepdir.liveness import pid_alive, process_tree, process_uid, same_process
from mushin_box._sweepdir.logs import started_cells
from mushin_box._sweepdir.manifest import (
    SweepBusyError,
    cell_records,
    combo_id,
    manifest_from_cells,
    mark_unstarted_cancelled,
)


def cell_label(directory: str | None, combo: dict[str, object]) -> str:
    """How a cell is named to the user: its directory, or, for a cell that never started,
    its swept values as overrides; a sweep of one cell has the engine's ``cell``.

    >>> cell_label("lr=0.1", {"lr": 0.1}), cell_label(None, {"lr": 0.1, "seed": 1})
    ('lr=0.1', 'lr=0.1 seed=1')
    >>> cell_label(None, {})
    'cell'
    """
    if directory:
        return directory
    return " ".join(f"{k}={v}" for k, v in combo.items()) or "cell"


@public
@attrs.frozen
class CancelReport:
    """What ``cancel`` did: cells now ``cancelled``, cells left alone and cells it could
    not stop, each with the reason."""

    cancelled: tuple[str, ...] = ()
    untouched: tuple[tuple[str, str], ...] = ()
    unreachable: tuple[tuple[str, str], ...] = ()
    scancelled: tuple[str, ...] = ()
    #: a line for each job id or process that was named but not acted on, and why
    refused: tuple[str, ...] = ()

    @property
    def scancel_argv(self) -> list[str]:
        """``scancel``'s arguments as it ran: an array's tasks as one expression."""
        return scancel_args(self.scancelled)


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def _stop_local(pid: int, grace_s: float, uid: int) -> None:
    """SIGTERM to the cell's (checked) process, then SIGKILL to what is left of its tree
    that runs as ``uid``."""
    tree = [p for p in process_tree(pid) if p > 1 and p != os.getpid() and process_uid(p) == uid]
    _signal([pid], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in tree):
        time.sleep(0.05)
    _signal([p for p in tree if pid_alive(p)], signal.SIGKILL)


#: squeue is asked about this many ids at a time: a ``-j`` naming 100,000 jobs is over the
#: kernel's 128 KiB limit for one argument
_SQUEUE_BATCH = 2000


def _sweeps_jobs(root: Path, wanted: Sequence[str], uid: int) -> tuple[list[str], list[str], bool]:
    """The ids among ``wanted`` that squeue shows now as this sweep's and run by ``uid``
    (its login name, else the number, as squeue's ``%u``), a line for each kind of other
    one, and whether squeue answered."""
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    ok = sorted({j for j in wanted if valid_job_id(j)})
    refused = [f"{j!r} is not a SLURM job id; not cancelled" for j in wanted if not valid_job_id(j)]
    shown: dict[str, tuple[str, str, str]] = {}
    for at in range(0, len(ok), _SQUEUE_BATCH):
        part = queued_jobs(ok[at : at + _SQUEUE_BATCH])
        if part is None:
            why = (
                f"squeue did not answer when asked about {len(ok)} job(s) (`squeue` says "
                "why: the controller down, a wrong SLURM_CONF)"
            )
            return [], [*refused, _ids_line(ok, why)], False
        shown.update(part)
    ended, foreign, others, ours = [], [], [], []
    for j in ok:  # one pass, each id to one list (kept in ok's order)
        if j not in shown:
            ended.append(j)
        elif not owned_by(shown[j][1], root):
            foreign.append(j)
        else:
            (ours if shown[j][2] == user else others).append(j)
    if ended:
        refused.append(_ids_line(ended, "not in the queue (ended; the id may be reused)"))
    if foreign:
        why = "not this sweep's (its comment lacks this sweep's mark; scancel it yourself if yours)"
        refused.append(_ids_line(foreign, why))
    if others:
        users = ", ".join(sorted({shown[j][2] for j in others}))
        refused.append(_ids_line(others, f"run by {users}, not by the sweep's owner {user}"))
    return ours, refused, True


def _ids_line(ids: Sequence[str], why: str) -> str:
    return f"SLURM job(s) {name_job_ids(ids)}: {why}; not cancelled"


def _select(cells: Sequence[CellView], names: Sequence[str] | None) -> list[CellView]:
    if not names:
        return list(cells)
    # a cell that never started is named by its values, as cancel and status print it
    by_dir = {cell_label(c.dir, c.combo): c for c in cells}
    unknown = [n for n in names if n.rstrip("/").rsplit("/", 1)[-1] not in by_dir]
    if unknown:
        known = ", ".join(sorted(by_dir)) or "none started yet"
        raise ValueError(f"no cell {', '.join(unknown)} in this sweep; its cells: {known}")
    return [by_dir[n.rstrip("/").rsplit("/", 1)[-1]] for n in names]


def _not_owned(st: os.stat_result, uid: int) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if st.st_uid != uid:
        return f"belongs to uid {st.st_uid}, not to the sweep's owner (uid {uid})"
    if writable_by_others(st):
        return "can be written by other users (chmod go-w it)"
    return None


def _read_owned(path: Path, uid: int) -> tuple[Any, str | None]:
    """A sidecar's content when it and its directory are ``uid``'s and no one else can
    write either, else ``(None, why)``; ``(None, None)`` when there is no such file."""
    try:
        problem = _not_owned(os.lstat(path.parent), uid)
        if problem:
            return None, f"its directory {problem}"
        fd, st = open_regular_stat(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as handle:  # the descriptor checked: no swap after the check
        problem = _not_owned(st, uid)
        data = b"" if problem else handle.read(read_limit(path.name) + 1)
    if problem:
        return None, problem
    try:
        return loads(data), None
    except ValueError:
        return None, "is not JSON"


def _cell_problem(root: Path, cell: CellView, uid: int, trusted: set[str]) -> str | None:
    """Why ``cell`` names no process or job that may be acted on: its status is not the
    owner's, changed since the sweep was read, or names a job no owned sidecar records."""
    record, problem = _read_owned(root / str(cell.dir) / STATUS_FILE, uid)
    if problem or not isinstance(record, dict):
        return f"its {STATUS_FILE} {problem or 'is gone'}"
    pid, start = record.get("pid"), record.get("pid_start")
    pid, start = pid if isinstance(pid, int) else None, start if isinstance(start, str) else None
    if (pid, start) != (cell.pid, cell.pid_start):
        return f"its {STATUS_FILE} changed while cancel read it (run cancel again)"
    job = record.get("slurm_job_id")
    if cell.job_id and cell.job_id != (str(job) if job else None) and cell.job_id not in trusted:
        return f"its job {cell.job_id} is recorded by no sidecar of the sweep's owner"
    return None


def _process_problem(pid: int, start: str | None, uid: int) -> str | None:
    """Why process ``pid`` may not be signalled: not the recorded one, or another user's."""
    if not same_process(pid, start):
        return "records no start time" if start is None else "is not the recorded one"
    runs_as = process_uid(pid)
    if runs_as != uid:
        return f"runs as uid {runs_as}, not as the sweep's owner (uid {uid})"
    return None


def _mark_cancelled(cell_dir: Path, since: str, who: str) -> bool:
    """Record ``cancelled`` unless the cell ended on its own first (an end written after
    ``since`` is the cancel's doing)."""
    record = read_json(cell_dir / STATUS_FILE)
    if not isinstance(record, dict):
        return False
    state = record.get("status")
    by_us = state in ("failed", "cancelled") and str(record.get("ended") or "") >= since
    if state != "running" and not by_us:
        return False
    now = timestamp()
    new = {**record, "status": "cancelled", "ended": record.get("ended") or now}
    new["reason"] = f"cancelled by {who} at {now}"
    write_json_atomic(cell_dir / STATUS_FILE, new)
    return True


def cancel(
    root: str | os.PathLike[str],
    cells: Sequence[str] | None = None,
    *,
    grace_s: float = 10.0,
    timeout_s: float = 120.0,
) -> CancelReport:
    """Stop the running cells of a sweep: all, or those ``cells`` names by directory (a
    ``ValueError`` lists the sweep's cells when one is not among them). ``grace_s``: how
    long a local cell has after SIGTERM before SIGKILL; ``timeout_s``: how long SLURM has
    to end the jobs."""
    path = Path(root).resolve()
    since = timestamp()
    who = f"{getpass.getuser()}@{socket.gethostname()} (mushin-box cancel)"
    uid = os.getuid() or os.stat(path).st_uid  # the owner rule (module doc)
    sweep = read_sweep(path)
    chosen = _select(sweep.cells, cells)
    submission, problem = _read_owned(path / JOBS_FILE, uid)
    refused: list[str] = []
    blocked: str | None = None  # why the unstarted cells may still start
    if problem:
        refused.append(f"{JOBS_FILE} {problem}; none of its jobs is cancelled")
        blocked = f"its job is named by a {JOBS_FILE} that is not the sweep owner's"
    ok = isinstance(submission, dict) and isinstance(submission.get("jobs"), list)
    submission = submission if ok else {}
    ids, bad = checked_job_ids(submission)
    refused += bad
    untouched, unreachable, targets = [], [], []
    unstarted = [c for c in chosen if c.state == "pending" and not c.dir]
    trusted = set(ids)
    for cell in chosen:
        if cell.state == "pending" and not cell.dir:
            continue  # its queued job is cancelled below
        if cell.state not in ("running", "unknown"):
            untouched.append((cell_label(cell.dir, cell.combo), cell.state))
        elif not cell.job_id and cell.host != socket.gethostname():
            unreachable.append((str(cell.dir), f"runs on {cell.host}: cancel it from there"))
        elif why := _cell_problem(path, cell, uid, trusted):
            refused.append(f"{cell.dir}: {why}; not acted on")
            unreachable.append((str(cell.dir), "its status is not the sweep owner's own"))
        else:
            targets.append(cell)
    if cells:  # the queued jobs of the named cells that have not started
        ids = _jobs_of(submission, [c.combo for c in unstarted], trusted)
    wanted = [*(c.job_id for c in targets if c.job_id), *ids]  # the queued jobs too
    jobs, why, answered = _sweeps_jobs(path, list(dict.fromkeys(wanted)), uid)
    refused += why
    if not answered:
        blocked = blocked or "the scheduler did not answer for the sweep's jobs"
    failed = scancel(jobs)
    if failed:  # nothing cancelled: no cell is marked as if it were
        failed = f"scancel could not run ({failed}): cancel again where it runs"
        blocked, jobs = blocked or failed, []
    stopped = set(jobs)
    pending: list[CellView] = []  # new lists, not list.remove: that is quadratic in the cells
    for cell in targets:
        if cell.job_id:
            if cell.job_id in stopped:
                pending.append(cell)
            else:
                why = f"its job {cell.job_id} was not cancelled" + (f": {failed}" if failed else "")
                unreachable.append((str(cell.dir), why))
            continue
        problem = None if cell.pid is None else _process_problem(cell.pid, cell.pid_start, uid)
        if cell.pid is not None and problem is None:
            _stop_local(cell.pid, grace_s, uid)
            pending.append(cell)
        else:
            refused.append(f"{cell.dir}: process {cell.pid} {problem}; not signalled")
            unreachable.append((str(cell.dir), f"process {cell.pid} not verified"))
    deadline = time.monotonic() + timeout_s
    done: list[str] = []
    while pending:
        states = job_states([c.job_id for c in pending if c.job_id])
        running, pending = pending, []
        for cell in running:
            record = read_json(path / str(cell.dir) / STATUS_FILE) or {}
            if record.get("status") == "running" and not owner_gone(record, states):
                pending.append(cell)
                continue
            if _mark_cancelled(path / str(cell.dir), since, who):
                done.append(str(cell.dir))
            else:
                untouched.append((str(cell.dir), str(record.get("status"))))
        if pending and time.monotonic() > deadline:
            unreachable += [(str(c.dir), "still running after the cancel") for c in pending]
            break
        if pending:
            time.sleep(0.2)
    if unstarted:
        # only the jobs it cancelled: a refused one is never waited for
        gone = blocked or _queue_emptied(path, deadline, [j for j in ids if j in stopped])
        marked: list[str] = []
        records = list(cell_records(path)) if gone is None else []
        # a status not read may be a cell that ran: nothing is marked then
        if gone is None and len(records) == len(started_cells(path)):
            reason = f"cancelled by {who} at {timestamp()}, before it started"
            try:
                only = [c.combo for c in unstarted] if cells else None
                marked = [
                    cell_label(None, c)
                    for c in mark_unstarted_cancelled(path, reason, only, records)
                ]
            except SweepBusyError:
                gone = _DRIVER_HOLDS
        done += marked
        done_now = set(marked)  # a list's `in` per cell is quadratic in the sweep
        left = [c for c in unstarted if cell_label(None, c.combo) not in done_now]
        if gone is None and left:  # started between our read and the scancel
            left = _started_meanwhile(path, left, since, who, done, untouched, unreachable)
        why = gone or "a cell's status could not be read (see the warnings)"
        unreachable += [(cell_label(None, c.combo), f"not started, and {why}") for c in left]
    return CancelReport(
        cancelled=tuple(done),
        untouched=tuple(untouched),
        unreachable=tuple(unreachable),
        scancelled=tuple(jobs),
        refused=tuple(refused),
    )


#: why a cell not started may still start, once its jobs left the queue
_DRIVER_HOLDS = "a driver (launch or Workflow.run) holds the sweep and may start it"
#: a queued cell that started while cancel ran, whose owner it cannot tell is gone
STILL_OWNED = "started while cancel ran; its owner still runs or cannot be asked: cancel it again"


def _started_meanwhile(
    root: Path,
    cells: Sequence[CellView],
    since: str,
    who: str,
    done: list[str],
    untouched: list[tuple[str, str]],
    unreachable: list[tuple[str, str]],
) -> list[CellView]:
    """Settle the queued cells that started after ``cancel`` read the sweep, once the queue
    is empty (added to the caller's lists); returns those still without a directory."""
    now = manifest_from_cells(root)["cells"]
    left, started = [], []
    for cell in cells:
        entry = now.get(combo_id(cell.combo))
        if not isinstance(entry, dict) or not entry.get("dir"):
            left.append(cell)
        else:
            name = str(entry["dir"])
            started.append((name, read_json(root / name / STATUS_FILE) or {}))
    # their jobs asked at once: one scheduler call, not one per cell
    states = job_states([str(r["slurm_job_id"]) for _, r in started if r.get("slurm_job_id")])
    for name, record in started:
        if record.get("status") == "running" and not owner_gone(record, states):
            # a job that runs other cells too was not cancelled for a named one
            unreachable.append((name, STILL_OWNED))
        elif _mark_cancelled(root / name, since, who):
            done.append(name)
        else:
            untouched.append((name, str(record.get("status"))))
    return left


def _jobs_of(
    submission: dict[str, object], combos: Sequence[dict[str, object]], ids: set[str]
) -> list[str]:
    """The ``ids`` of jobs whose overrides set every swept key of one of ``combos`` to its
    value (a job that says less may run other cells too)."""
    out = []
    jobs = submission.get("jobs")
    for entry in jobs if isinstance(jobs, list) else []:
        if not isinstance(entry, dict) or str(entry.get("job_id")) not in ids:
            continue
        given = entry.get("overrides")
        keys = {str(o).partition("=")[0].lstrip("+~") for o in given or ()}
        if isinstance(given, list) and any(
            set(c) <= keys and job_runs_cell(given, c) for c in combos
        ):
            out.append(str(entry["job_id"]))
    return out


def _queue_emptied(root: Path, deadline: float, ids: Sequence[str]) -> str | None:
    """Wait (until ``deadline``) for the jobs ``ids`` to leave the queue and the driver to
    let go of the lock: None once nothing can start those cells, else why not."""
    while True:
        states = job_states(ids)
        if any(is_unknown(states.get(j)) for j in ids):
            return "the scheduler did not answer for the sweep's jobs"
        live = [j for j in ids if is_live(states.get(j, ""))]
        if not live and not driver_running(root):
            return None
        if time.monotonic() > deadline:
            return f"its job is still queued ({', '.join(live)})" if live else _DRIVER_HOLDS
        time.sleep(0.2)

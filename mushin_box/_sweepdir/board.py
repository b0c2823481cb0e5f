# SPDX-License-Identifier: MIT
"""The sweep as its readers see it: every cell's state, owner, timing, metrics and error,
read from the sidecars alone (``status``, ``ls``, ``wait`` and ``logs`` run on any login
node, so nothing here writes), asking ``squeue``/``sacct`` once per sweep or this host's
process table what the files can't tell. The states a reader adds to a status file's:

* ``failed`` for a ``running`` status whose process or job is gone, or that names no owner
  (:data:`STALE`); the next run corrects the file, under the sweep's lock.
* ``unknown``: the cell's SLURM job could not be asked about. It may still run, so it is
  never shown ended and keeps ``wait`` waiting (:attr:`SweepView.unanswered`).
* ``pending`` with a job id: a cell not started, or ended before the latest submission,
  while a job of that submission is live, with squeue's reason (``never_starts``: a reason
  the job waits under for good). The job is found by its overrides (:func:`job_finder`).

Examples
--------
>>> import tempfile
>>> from mushin_box._core.sidecars import write_json_atomic
>>> root = Path(tempfile.mkdtemp())
>>> write_json_atomic(root / "mushin_sweep.json", {"grid": {"lr": [0.1, 1.0]}, "cells": {}})
>>> write_json_atomic(root / "lr=0.1" / "mushin_status.json",
...                   {"combo": {"lr": 0.1}, "status": "completed", "attempt": 1})
>>> sweep = read_sweep(root)
>>> [(c.combo, c.state) for c in sweep.cells]
[({'lr': 0.1}, 'completed'), ({'lr': 1.0}, 'pending')]
>>> sweep.counts()
{'pending': 1, 'completed': 1}
>>> find = job_finder({"9_0": ["x=1", "tag='a'"], "9_1": ["x=2"], "9_2": ["x=2"]})
>>> find({"x": 2}), find({"x": 3}), find({})
('9_1', None, None)
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import itertools
import json
import math
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core import layout
from mushin_box._core.gcpause import gc_paused
from mushin_box._core.overrides import format_value
from mushin_box._core.safeio import UnsafeFileError, read_bounded
from mushin_box._core.sidecars import read_json
from mushin_box._core.targets import public
from mushin_box._slurm.jobs import is_live, is_unknown, job_states, never_starts
from mushin_box._slurm.submitted import job_ids, read_submission
from mushin_box._sweepdir.liveness import check, owner_of, pid_alive
from mushin_box._sweepdir.manifest import (
    cell_records,
    grid_key,
    in_grid_order,
    is_sweep_dir,
    manifest_from_cells,
    read_sweep_manifest,
)

#: the states a reader shows, in the order counts list them (``unknown``: module doc)
VIEW_STATES = (*layout.CELL_STATES[:2], "unknown", *layout.CELL_STATES[2:])


@public
@attrs.frozen
class CellView:
    """One cell as a reader sees it (``state`` corrected for a dead owner, see module doc)."""

    dir: str | None
    combo: dict[str, Any]
    state: str
    recorded_state: str
    attempt: int = 0
    job_id: str | None = None
    host: str | None = None
    pid: int | None = None
    #: the start time the status records for ``pid`` (``cancel`` signals only that process)
    pid_start: str | None = None
    started: str | None = None
    ended: str | None = None
    duration_s: float | None = None
    metrics: dict[str, float] = attrs.field(factory=dict)
    error_type: str | None = None
    error_message: str | None = None
    error_file: str | None = None
    reason: str | None = None
    logs: dict[str, str] = attrs.field(factory=dict)
    #: a pending cell's SLURM job waits for good
    never_starts: bool = False
    #: a running cell's latest epoch, first metric and its last value (None: no series yet)
    epoch: int | None = None
    metric: str | None = None
    metric_value: float | None = None
    #: see :func:`restart_fields`; ``duration_s`` sums the attempts, ``attempt_s`` the last
    restarts: int = 0
    restarts_left: int | None = None
    restarted_after: dict[str, Any] | None = None
    attempt_s: float | None = None
    #: the training limits its status records: a resume may raise them for some cells only
    limits: dict[str, Any] = attrs.field(factory=dict)


@public
@attrs.frozen
class SweepView:
    """A sweep directory: its swept parameters and its cells, in grid order."""

    root: Path
    params: tuple[str, ...]
    cells: tuple[CellView, ...]
    run_id: str | None = None
    launcher: str | None = None
    job_ids: tuple[str, ...] = ()
    #: a driver holds the sweep's lock, or one of its jobs is live (or unanswered): its
    #: pending cells may still start
    active: bool = False
    #: SLURM jobs the scheduler did not answer for
    unanswered: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """Cells by state, in :data:`VIEW_STATES` order (states with no cell left out)."""
        found = [c.state for c in self.cells]
        return {s: found.count(s) for s in VIEW_STATES if s in found}

    @property
    def started(self) -> str | None:
        """When its first cell started (ISO 8601), if any has."""
        return min((c.started for c in self.cells if c.started), default=None)

    @property
    def going(self) -> bool:
        """A cell runs (or may: ``unknown``), or waits on a driver or job that may start it."""
        states = {c.state for c in self.cells}
        return bool({"running", "unknown"} & states) or ("pending" in states and self.active)

    @property
    def finished(self) -> bool:
        """Every cell is done for this run (nothing of it runs, nothing waits)."""
        return all(c.state in layout.DONE_CELL_STATES for c in self.cells)

    def wall_s(self, now: _dt.datetime | None = None) -> float | None:
        """From the first start to the last end (to ``now`` while cells still run)."""
        start = _parse(self.started)
        if start is None:
            return None
        end = max(filter(None, (_parse(c.ended) for c in self.cells)), default=None)
        if self.going or end is None:
            end = now or _dt.datetime.now(_dt.UTC)
        return max(0.0, (end - start).total_seconds())


def _parse(text: Any) -> _dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        when = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.UTC)


#: why a ``running`` status that names no owner is shown failed (module doc)
STALE = (
    "stale status: it says running but names no process or SLURM job (written by an "
    "older mushin-box, or edited); nothing runs it, and a resume runs it again"
)


def owner_gone(record: Mapping[str, Any], job_states: Mapping[str, str]) -> str | None:
    """Why a ``running`` cell's owner is known to be gone; None: alive, or it can't be told
    from here. ``job_states``: the sweep's SLURM jobs' states, asked once."""
    return _judge(record, job_states)[1]


def _judge(record: Mapping[str, Any], job_states: Mapping[str, str]) -> tuple[bool, str | None]:
    """(the scheduler did not answer, why the owner is gone) of a ``running`` record."""
    owner = owner_of(record)
    if owner is None:
        return False, STALE
    answer = check(owner, job_state=job_states.get)
    return answer.unknown, None if answer.alive else answer.reason


#: the most keys a cell's metrics file may hold: each key is a column to every reader, so
#: the byte limit alone does not bound one (20 MB holds 10**6 keys); far above what a run
#: logs, and a file past it is refused naming it, not shown in part
METRIC_KEYS_BOUND = 10_000


def read_metrics(cell_dir: str | os.PathLike[str]) -> Any:
    """A cell's metrics file as read (None: none; unreadable: warned); one of more than
    :data:`METRIC_KEYS_BOUND` keys is refused, an ``UnsafeFileError`` naming the file and fix."""
    path = os.path.join(cell_dir, layout.METRICS_FILE)
    metrics = read_json(path)
    if isinstance(metrics, dict) and len(metrics) > METRIC_KEYS_BOUND:
        raise UnsafeFileError(
            f"{path}: {len(metrics):,} metric keys, over the bound of "
            f"{METRIC_KEYS_BOUND:,} a metrics file may hold: log fewer scalars (a series "
            "belongs in the fit's metrics), or move the file out of the cell to read the rest"
        )
    return metrics


def scalar_metrics(metrics: Any) -> dict[str, float]:
    """A cell's numeric metrics as floats (anything else left out; ``{}`` for a metrics
    file that is not an object)."""
    if not isinstance(metrics, dict):
        return {}
    return {str(k): n for k, v in metrics.items() if (n := _number(v)) is not None}


def _duration(record: Mapping[str, Any], state: str) -> float | None:
    start, spent = _parse(record.get("started")), _number(record.get("duration_s"))
    if spent is not None or start is None or state != "running":
        return spent
    earlier = _number(record.get("earlier_s")) or 0.0  # the fit's attempts before this one
    return earlier + max(0.0, (_dt.datetime.now(_dt.UTC) - start).total_seconds())


def _number(value: Any) -> float | None:
    """A number from a hand-editable file as a float: None for anything else, NaN kept, an
    int too large for a float infinite.

    >>> _number(float("nan")), _number(-(10**400)), _number(True)
    (nan, -inf, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) or abs(value) <= sys.float_info.max:
        return float(value)  # NaN and the infinities stay what they are
    return math.inf if value > 0 else -math.inf  # an int too large for a float


def _count(value: Any) -> int | None:
    """A count (attempts, restarts) from a hand-editable file: None unless a finite number."""
    number = _number(value)
    return int(number) if number is not None and math.isfinite(number) else None


@attrs.frozen
class _Seen:
    """What the scheduler says over a cell's status: ``state`` (None: as recorded)
    because of ``reason``, with ``job`` when a new job runs it."""

    state: str | None = None
    reason: str | None = None
    job: str | None = None
    never: bool = False


def cell_view(
    root: Path, entry: Mapping[str, Any], record: Mapping[str, Any], seen: _Seen = _Seen()
) -> CellView:
    """A cell as ``read_sweep`` shows it, from its manifest ``entry``, status ``record`` and
    what the scheduler says over them (os.path, not pathlib: ``status`` builds 10,000)."""
    directory = entry.get("dir")
    cell_dir = os.path.join(root, directory) if directory else None
    recorded = str(record.get("status", entry.get("status", "pending")))
    state = seen.state or recorded
    gone = seen.reason if state == "failed" and recorded == "running" else None
    error: dict[str, Any] = record["error"] if isinstance(record.get("error"), dict) else {}
    if gone:
        error = {"type": "StaleStatus" if gone == STALE else "JobEnded", "message": gone}
    elif state != recorded:
        error = {}
    # a completed cell's traceback (an earlier attempt's) is not its error: not looked for
    error_file = (
        os.path.join(cell_dir, layout.ERROR_FILE) if cell_dir and state != "completed" else None
    )
    metrics = read_metrics(cell_dir) if cell_dir and state == "completed" else None
    logs: dict[str, Any] = record["logs"] if isinstance(record.get("logs"), dict) else {}
    latest = _latest(Path(cell_dir)) if cell_dir and state in ("running", "unknown") else None
    return CellView(
        dir=directory,
        combo=dict(entry.get("combo") or record.get("combo") or {}),
        state=state,
        recorded_state=recorded,
        attempt=_count(record.get("attempt", entry.get("attempt"))) or 0,
        job_id=seen.job or (str(record["slurm_job_id"]) if record.get("slurm_job_id") else None),
        host=record.get("host"),
        pid=record.get("pid") if isinstance(record.get("pid"), int) else None,
        pid_start=record.get("pid_start") if isinstance(record.get("pid_start"), str) else None,
        started=record.get("started"),
        ended=record.get("ended"),
        duration_s=_duration(record, state) if state != "pending" else None,
        metrics=scalar_metrics(metrics),
        error_type=error.get("type"),
        error_message=(error.get("message") or record.get("reason")) if error else None,
        error_file=error_file if error_file and os.path.isfile(error_file) else None,
        reason=seen.reason or (reason if isinstance(reason := record.get("reason"), str) else None),
        logs={str(k): str(v) for k, v in logs.items()},
        never_starts=seen.never,
        **(latest or {}),
        attempt_s=_number(record.get("attempt_s")),
        **restart_fields(record),
        limits=dict(limits) if isinstance(limits := record.get("limits"), dict) else {},
    )


def restart_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """``restarts`` (torchrun's, or SLURM's requeues), ``restarts_left`` (None: unknown) and
    ``restarted_after`` (``{"rank", "host", "ended", "epoch"}``), from a status or a
    manifest entry; another type is left out."""
    after = record.get("restarted_after")
    return {
        "restarts": _count(record.get("restarts")) or 0,
        "restarts_left": _count(record.get("restarts_left")),
        "restarted_after": after if isinstance(after, dict) else None,
    }


#: the most ``status`` reads of a running cell's series; a larger file shows no epoch
_LATEST_READ_BYTES = 32 << 20
_FIT_SERIES = layout.stage_metrics_json_file("fit")


def _latest(cell_dir: Path) -> dict[str, Any] | None:
    """``{epoch, metric, metric_value}`` (the first metric by name with a finite value, its
    last one) from the cell's ``fit_metrics.json``, read bounded and not followed; None
    without a readable series."""
    try:
        data = json.loads(read_bounded(cell_dir / _FIT_SERIES, _LATEST_READ_BYTES))
    except (OSError, ValueError):  # missing, refused, or being replaced: nothing to show
        return None
    epochs = data.get("epoch") if isinstance(data, dict) else None
    if not isinstance(epochs, list) or not epochs:
        return None
    last = epochs[-1]
    out = {"epoch": last} if isinstance(last, int) and not isinstance(last, bool) else {}
    for name in sorted(k for k in data if k != "epoch" and isinstance(data[k], list)):
        finite = [n for v in data[name] if (n := _number(v)) is not None and math.isfinite(n)]
        if finite:
            return {**out, "metric": str(name), "metric_value": finite[-1]}
    return out


@gc_paused()  # a bulk read: see _core/gcpause.py
def read_sweep(root: str | os.PathLike[str], *, liveness: bool = True) -> SweepView:
    """Read a sweep directory: every cell of its grid, started or not (``liveness``: check
    the owners of ``running`` cells; False shows the files as they are). A
    ``FileNotFoundError`` when ``root`` holds neither a manifest nor a cell status."""
    path = Path(root)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a directory")
    old = read_sweep_manifest(path) or {}
    found = list(cell_records(path))  # each status file read once
    params, entries = _entries(path, old, found)
    if not old and not any(e.get("dir") for e in entries):
        raise FileNotFoundError(
            f"{path} is not a sweep directory (no {layout.MANIFEST_FILE} and no "
            f"*/{layout.STATUS_FILE}); give the working_dir of a run"
        )
    records = {cell_dir.name: record for cell_dir, record in found}
    submission = read_submission(path)
    jobs = job_ids(submission)
    running = [r for r in records.values() if r.get("status") == "running"]
    ids = [str(r["slurm_job_id"]) for r in running if r.get("slurm_job_id")]
    # the scheduler is asked only while a cell may still change: a finished sweep is read
    # from its files alone, unless its latest submission came after a cell ended
    unsettled = running or any(
        (records.get(e.get("dir") or "") or {}).get("status", "pending") == "pending"
        for e in entries
    )
    ask = liveness and (ids or jobs) and (unsettled or resubmitted(records, submission))
    reasons: dict[str, str] = {}
    states = job_states([*ids, *jobs], reasons=reasons) if ask else {}
    again = _queued_again(submission, states, reasons)
    cells = []
    for entry in entries:
        record = records.get(entry.get("dir") or "", {})
        seen = _Seen()
        if liveness and record.get("status") == "running":
            unknown, gone = _judge(record, states)
            if unknown:
                seen = _Seen("unknown", f"SLURM job {record.get('slurm_job_id')}: " + UNANSWERED)
            elif gone:
                seen = _Seen("failed", gone)
        elif liveness and again is not None:
            seen = again(entry, record)
        cells.append(cell_view(path, entry, record, seen))
    return SweepView(
        root=path,
        params=params,
        cells=tuple(cells),
        run_id=old.get("run_id"),  # read_sweep_manifest's: a str or None
        launcher=old.get("launcher"),
        job_ids=tuple(jobs),
        active=driver_running(path)
        or any(is_live(states.get(j, "")) or is_unknown(states.get(j)) for j in jobs)
        or local_jobs_alive(submission),
        unanswered=tuple(sorted(j for j, state in states.items() if is_unknown(state))),
    )


def _entries(
    root: Path, old: Mapping[str, Any], found: list[tuple[Path, dict[str, Any]]]
) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The swept parameters and every cell's entry in grid order, as
    ``manifest_from_cells`` gives them, without a ``combo_id`` (JSON) per cell."""
    grid, cells = old.get("grid"), old.get("cells")
    mine = (
        {"combo": r["combo"], "status": r.get("status", "pending"), "dir": d.name} for d, r in found
    )
    placed = in_grid_order(grid, mine) if isinstance(grid, dict) else None
    if placed is None or not isinstance(grid, dict):  # no grid: the cells tell it
        manifest = manifest_from_cells(root, records=found)
        return tuple(manifest["params"]), list(manifest["cells"].values())
    params = list(grid)
    cancelled = {  # a cell cancelled before it started has no status file
        grid_key(e["combo"], params): e
        for e in (cells.values() if isinstance(cells, dict) else ())
        if isinstance(e, dict)
        and e.get("status") == "cancelled"
        and isinstance(e.get("combo"), dict)
    }
    for entry in placed if cancelled else ():
        was = cancelled.get(grid_key(entry["combo"], params)) if "dir" not in entry else None
        if was is not None:
            entry.update(status="cancelled", reason=str(was.get("reason") or "cancelled"))
    return tuple(params), placed


#: what a reader says of a job the scheduler did not answer for
UNANSWERED = (
    "the scheduler did not answer (squeue failed: check SLURM_CONF and that the "
    "controller is up); it may still run"
)


def resubmitted(records: Mapping[str, Mapping[str, Any]], submission: Mapping[str, Any]) -> bool:
    """Did the latest submission come after a cell that had not completed ended?"""
    when = _parse(submission.get("submitted"))
    return when is not None and any(
        r.get("status") not in ("completed", "running") and _ended_before(r, when)
        for r in records.values()
    )


def _ended_before(record: Mapping[str, Any], when: _dt.datetime) -> bool:
    stamp = _parse(record.get("ended"))
    return stamp is None or stamp <= when


def _queued_again(
    submission: Mapping[str, Any], states: Mapping[str, str], reasons: Mapping[str, str]
) -> Any:
    """``(entry, record) -> _Seen`` for the cells a live submission runs (again), or None
    when no job of the latest submission is live (module doc). A cell is matched to its
    job by the job's overrides (no match: ``pending`` without a job id)."""
    when = _parse(submission.get("submitted"))
    live = {
        str(job["job_id"]): job.get("overrides")
        for job in submission.get("jobs", ())
        if isinstance(job, dict) and is_live(states.get(str(job.get("job_id")), ""))
    }
    if when is None or not live:
        return None
    find = job_finder(live)

    def seen(entry: Mapping[str, Any], record: Mapping[str, Any]) -> _Seen:
        if record.get("status") == "completed" or not _ended_before(record, when):
            return _Seen()
        combo = entry.get("combo") or record.get("combo") or {}
        job = find(combo)
        if job is None and not record and entry.get("status") == "cancelled":
            return _Seen()  # cancelled before it started, and no live job runs it
        if job is None:
            return _Seen("pending", "a job of the latest submission is queued")
        said = reasons.get(job)
        if said:
            return _Seen("pending", said, job, never=never_starts(said))
        return _Seen("pending", f"SLURM job {job} is {states[job]}", job)

    return seen


def local_jobs_alive(submission: Mapping[str, Any]) -> bool:
    """Does a local job of the latest submission (its id is its pid) still run here?"""
    if submission.get("cluster") != "local" or submission.get("host") != socket.gethostname():
        return False
    ids = job_ids(submission, "local")
    return any(pid_alive(int(j)) for j in ids if j.isdigit() and 1 < int(j) < 2**22)


def driver_running(root: Path) -> bool:
    """Does a driver (``Workflow.run``, a launch) hold the sweep's lock? Probed with a shared,
    non-blocking ``flock``; a reader never creates the lock file."""
    try:
        fd = os.open(root / layout.LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError as exc:
        return isinstance(exc, BlockingIOError)
    finally:
        os.close(fd)


def find_sweeps(root: str | os.PathLike[str] = ".", *, max_depth: int = 4) -> list[Path]:
    """The sweep directories under ``root`` (itself included), newest first, at most
    ``max_depth`` levels down (hidden directories are not searched)."""
    found, base = [], len(Path(root).parts)
    for current, dirs, files in os.walk(root):
        here = Path(current)
        if layout.MANIFEST_FILE in files or is_sweep_dir(here):
            dirs[:] = []  # its subdirectories are its cells
            found.append(here)
        elif len(here.parts) - base >= max_depth:
            dirs[:] = []
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))

    def updated(path: Path) -> float:
        try:
            return (path / layout.MANIFEST_FILE).stat().st_mtime
        except OSError:
            return 0.0

    return sorted(found, key=updated, reverse=True)


def latest_sweep(root: str | os.PathLike[str] = ".") -> Path | None:
    """The most recently updated sweep under ``root``, if there is one."""
    return next(iter(find_sweeps(root)), None)


#: a cell whose values have more spellings together than this is matched by a scan
_MOST_LOOKUPS = 64


def spellings(value: Any) -> set[str]:
    """How an override may spell ``value`` (Hydra's sweeper unquotes plain strings).

    >>> sorted(spellings("adam")), spellings(0.1), spellings(object())
    (['"adam"', "'adam'", 'adam'], {'0.1'}, set())
    """
    try:
        out = {format_value(value)}
    except (TypeError, ValueError):
        return set()
    if isinstance(value, str):
        out |= {value, f"'{value}'", f'"{value}"'}
    return out


def _split(override: str) -> tuple[str, str]:
    """An override's key (``+``/``~`` dropped) and value text (``""`` without ``=``)."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def job_finder(jobs: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], str | None]:
    """``find(combo)``: the first of ``jobs`` (``{job id: overrides}``) whose overrides set
    every swept value of ``combo``; None for none, or an empty combo."""
    parsed = [
        (job, dict(_split(item) for item in o if isinstance(item, str) and "=" in item))
        for job, o in jobs.items()
        if isinstance(o, list)
    ]
    indexes: dict[tuple[str, ...], dict[tuple[str | None, ...], int]] = {}

    def find(combo: Mapping[str, Any]) -> str | None:
        if not combo:
            return None
        keys = tuple(combo)
        ways = [spellings(v) for v in combo.values()]
        if not all(ways):
            return None
        if math.prod(map(len, ways)) > _MOST_LOOKUPS:  # many string values: a scan is cheaper
            found = (
                j for j, g in parsed if all(g.get(k) in w for k, w in zip(keys, ways, strict=True))
            )
            return next(found, None)
        index = indexes.get(keys)
        if index is None:  # the position of the first job for each set of values
            index = indexes[keys] = {}
            for at, (_, given) in enumerate(parsed):
                index.setdefault(tuple(given.get(k) for k in keys), at)
        hits = [index[t] for t in itertools.product(*ways) if t in index]
        return parsed[min(hits)][0] if hits else None

    return find


def job_runs_cell(overrides: Any, combo: Mapping[str, Any]) -> bool:
    """May a job with these ``overrides`` (``mushin_jobs.json``) run the cell of ``combo``?
    Yes unless they set one of its swept keys to another value; overrides that are not a
    list of strings, or a value with no spelling, say nothing, so: yes (never run a cell
    twice).

    >>> job_runs_cell(["x=1", "tag=b"], {"x": 1}), job_runs_cell(["x=2"], {"x": 1})
    (True, False)
    >>> job_runs_cell(None, {"x": 1}), job_runs_cell(["x='a'"], {"x": "a"})
    (True, True)
    """
    return grid_runs({key: [value] for key, value in combo.items()})(overrides)


def grid_runs(grid: Mapping[str, Sequence[Any]]) -> Callable[[Any], bool]:
    """``runs(overrides)``: may a job with these overrides run some cell of ``grid``? What
    :func:`job_runs_cell` says of any of its cells, decided key by key in the grid's order,
    without a pass over the cells for each job.

    >>> runs = grid_runs({"x": [1, 2], "tag": ["a"]})
    >>> runs(["x=2", "tag='a'"]), runs(["x=3"]), runs(["seed=7"]), runs(None)
    (True, False, True, True)
    """
    if any(not values for values in grid.values()):
        return lambda overrides: False  # no cell at all
    spelled = {key: [spellings(v) for v in values] for key, values in grid.items()}
    # a key's spellings; None: one of its values has none
    ways = {key: set().union(*s) if all(s) else None for key, s in spelled.items()}

    def runs(overrides: Any) -> bool:
        if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
            return True  # not a list of strings: they say nothing of the cells it runs
        given = dict(map(_split, overrides))
        for key, spelled in ways.items():  # the first key they set to no value of it decides
            if key in given and (spelled is None or given[key] not in spelled):
                return spelled is None
        return True

    return runs

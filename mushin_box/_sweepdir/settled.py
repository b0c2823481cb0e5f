# SPDX-License-Identifier: MIT
"""A finished sweep as its manifest tells it: one file for every cell's state, each cell's
status record opened only where the manifest cannot answer (``status``, ``show``,
``report``, ``load_experiment``).

:func:`~mushin_box._sweepdir.board.read_sweep` reads a running sweep from every cell's
status record, rebuilds the manifest from them and asks the scheduler about cells that may
still change. A finished sweep needs none of that: the manifest (``mushin_sweep.json``,
written by the driver after the last cell ended) answers, and a cell's status record is
opened only where it cannot:

* the manifest's entry is older than the cell's status file (its modification time is not
  earlier than the status file's), or the cell did not complete (its error and reason are
  whole in its status file only): the status file is read instead;
* a cell the manifest has no entry for, a symlink among the cells, a cell that is not in
  an end state (running, pending), a driver holding the sweep's lock, or a submission
  newer than the manifest: the sweep may still change, so :func:`finished_entries` says
  None and the reader reads every status file (``read_sweep``).

The entries come out in ``read_sweep``'s order (the grid's, then cells of an earlier grid by
directory name).

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> from mushin_box._core.sidecars import write_json_atomic
>>> root = Path(tempfile.mkdtemp())
>>> write_json_atomic(root / "lr=0.1" / "mushin_status.json",
...                   {"combo": {"lr": 0.1}, "status": "completed"})
>>> write_json_atomic(root / "mushin_sweep.json", {"grid": {"lr": [0.1]}, "params": ["lr"],
...     "cells": {'{"lr":0.1}': {"combo": {"lr": 0.1}, "status": "completed", "dir": "lr=0.1"}}})
>>> [(e["dir"], e["status"]) for e in finished_entries(root)[1]]
[('lr=0.1', 'completed')]
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.gcpause import gc_paused
from mushin_box._core.layout import DONE_CELL_STATES, JOBS_FILE, MANIFEST_FILE, STATUS_FILE
from mushin_box._sweepdir.gridorder import Entry, grid_key, in_grid_order

__all__ = ["Heading", "bare_view", "finished_entries", "read_object", "read_settled"]


def _subdirs(root: Path) -> set[str] | None:
    """The real directories of ``root``; None when a symlink is among its entries (a cell
    elsewhere: ``read_sweep`` says so, and never follows it)."""
    out = set()
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.is_symlink():
                return None
            if entry.is_dir(follow_symlinks=False):
                out.add(entry.name)
    return out


def _mtime(path: str) -> int | None:
    """The modification time of the regular file ``path`` (None: missing, or not one)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mtime_ns if stat.S_ISREG(st.st_mode) else None


def _unstarted(entry: Any) -> bool:
    """A cell with no directory that may still start (not cancelled before it started)."""
    return (
        isinstance(entry, dict) and entry.get("dir") is None and entry.get("status") != "cancelled"
    )


def finished_entries(root: str | os.PathLike[str]) -> tuple[dict[str, Any], list[Entry]] | None:
    """The manifest and every cell's entry (``combo``, ``status``, ``dir``, ``attempt``,
    ``error``, ``reason``) of a finished sweep, each status file read only where the
    manifest is older than it; None when the manifest cannot answer (see module doc)."""
    from mushin_box._sweepdir.board import driver_running
    from mushin_box._sweepdir.manifest import read_status, read_sweep_manifest

    path = Path(root)
    base = os.fspath(path)
    written = _mtime(os.path.join(base, MANIFEST_FILE))
    if written is None or driver_running(path):
        return None
    jobs = _mtime(os.path.join(base, JOBS_FILE))
    if jobs is not None and jobs >= written:  # a submission the manifest may not know
        return None
    manifest = read_sweep_manifest(path)
    if manifest is None or not isinstance(manifest.get("cells"), dict):
        return None
    if any(_unstarted(e) for e in manifest["cells"].values()):  # a run's first manifest
        return None
    params = list(manifest["grid"])
    entries = in_grid_order(manifest["grid"], manifest["cells"].values())
    dirs = _subdirs(path)
    if entries is None or dirs is None:
        return None
    seen: set[str] = set()
    for at, entry in enumerate(entries):
        name = entry.get("dir")
        if name is None:
            if entry.get("status") != "cancelled":  # pending: it may still start
                return None
            continue
        if not isinstance(name, str) or name not in dirs or name in seen:
            return None
        seen.add(name)
        cell = os.path.join(base, name)
        changed = _mtime(os.path.join(cell, STATUS_FILE))
        # newer than the manifest, or a cell that did not complete (its error, its
        # reason: the status file has them whole): read it
        if changed is None or changed >= written or entry.get("status") != "completed":
            record = read_status(cell)
            if record is None or grid_key(record["combo"], params) != grid_key(
                entry["combo"], params
            ):
                return None
            entries[at] = entry = {**record, "dir": name}
        if entry.get("status") not in DONE_CELL_STATES:
            return None
    for name in dirs - seen:  # a cell the manifest does not know
        if os.path.lexists(os.path.join(base, name, STATUS_FILE)):
            return None
    return manifest, entries


def read_object(path: str) -> Any:
    """The JSON object sidecar at ``path`` (None: missing), read bounded and without
    following a symlink; a refused, corrupt or non-object file goes through
    :func:`~mushin_box._core.sidecars.read_json`, which warns naming it. The direct path
    skips ``read_json``'s per-call ``Path`` objects: a third of ``show``'s time at 10,000
    cells."""
    from mushin_box._core.layout import read_limit
    from mushin_box._core.safeio import read_bounded
    from mushin_box._core.sidecars import loads, read_json

    try:
        value = loads(read_bounded(path, read_limit(os.path.basename(path))))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError):
        return read_json(path)
    return value if isinstance(value, dict) else read_json(path)


@attrs.frozen
class Heading:
    """A finished sweep's first line, known before any cell's own file is read: its
    directory, its cells by state (:meth:`counts`, as ``SweepView.counts`` gives them) and
    what runs it. Not a view of 10,000 cells built to be thrown away."""

    root: Path
    launcher: str | None
    states: tuple[str, ...]

    def counts(self) -> dict[str, int]:
        from collections import Counter

        from mushin_box._sweepdir.board import VIEW_STATES

        found = Counter(self.states)
        return {s: found[s] for s in VIEW_STATES if s in found}


def bare_view(
    root: Path, manifest: Mapping[str, Any], entries: Sequence[Entry], **fields: Any
) -> tuple[Any, Heading]:
    """The sweep's :class:`~mushin_box._sweepdir.board.SweepView` as the manifest tells it
    (``fields``: more of the view's) without its cells, and its :class:`Heading`."""
    from mushin_box._sweepdir.board import SweepView

    launcher = manifest.get("launcher")
    launcher = launcher if isinstance(launcher, str) else None
    view = SweepView(
        root=root,
        params=tuple(manifest["grid"]),
        cells=(),
        run_id=manifest.get("run_id"),
        launcher=launcher,
        **fields,
    )
    return view, Heading(root, launcher, tuple(str(e.get("status")) for e in entries))


@gc_paused()  # a bulk read: see _core/gcpause.py
def read_settled(
    root: str | os.PathLike[str], *, heading: Callable[[Heading], None] | None = None
) -> Any:
    """A finished sweep as ``status`` shows it (every field
    :func:`~mushin_box._sweepdir.board.read_sweep` gives, read from each cell's status
    record and metrics), or None when the manifest cannot answer, or a job of the latest
    submission may run a cell again: then ``read_sweep`` reads it, asking the scheduler.

    ``heading``: called with its :class:`Heading` before any cell's own file is read: what
    is known from the manifest (and the status records it is older than), for a first
    line printed at once.
    """

    from mushin_box._slurm.submitted import job_ids, read_submission
    from mushin_box._sweepdir.board import cell_view, local_jobs_alive, resubmitted
    from mushin_box._sweepdir.manifest import read_status

    found = finished_entries(root)
    if found is None:
        return None
    manifest, entries = found
    path = Path(root)
    submission = read_submission(path)
    ended = {e["dir"]: e for e in entries if e.get("dir") and e.get("status") != "completed"}
    if resubmitted(ended, submission):  # its queued jobs may run them again
        return None
    view, head = bare_view(
        path,
        manifest,
        entries,
        job_ids=tuple(job_ids(submission)),
        active=local_jobs_alive(submission),
    )
    if heading is not None:
        heading(head)
    base = os.fspath(path)
    cells = []
    for entry in entries:
        name = entry.get("dir")
        record: dict[str, Any] | None = {}  # a cell cancelled before it started has none
        if name:
            record = read_status(os.path.join(base, name))
            if record is None or record.get("status", "pending") != entry.get("status"):
                return None  # it changed since the manifest was checked: read it all again
        cells.append(cell_view(path, entry, record))
    return attrs.evolve(view, cells=tuple(cells))

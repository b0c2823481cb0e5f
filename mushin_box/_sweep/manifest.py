# SPDX-License-Identifier: MIT
"""The sweep root: its manifest (a cache rebuilt from the cell sidecars) and its lock."""

from __future__ import annotations

import datetime as _dt
import fcntl
import itertools
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.layout import LOCK_FILE, MANIFEST_FILE, STATUS_FILE
from mushin_box._core.sidecars import canonical_dumps, read_json, write_json_atomic

__all__ = [
    "live_cells",
    "reconcile_abandoned",
    "SweepLock",
    "cell_records",
    "combo_id",
    "read_manifest",
    "manifest_from_cells",
    "rebuild_manifest",
    "write_manifest",
]


def combo_id(combo: Mapping[str, Any]) -> str:
    """A canonical text identity of a cell's swept values (keys sorted)."""
    return canonical_dumps(dict(combo)).decode("utf-8").rstrip("\n")


class SweepLock:
    """Only one ``run()`` at a time per sweep directory (an advisory ``flock``)."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> SweepLock:
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(
                f"another run() is already using the sweep directory {self.path.parent}; "
                "wait for it to finish or use another working_dir"
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def cell_records(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(cell dir, status record) for every cell with a readable status sidecar."""
    for status in sorted(root.glob(f"*/{STATUS_FILE}")):
        record = read_json(status)
        if isinstance(record, dict) and isinstance(record.get("combo"), dict):
            yield status.parent, record


def read_manifest(root: Path) -> dict[str, Any] | None:
    data = read_json(root / MANIFEST_FILE)
    return data if isinstance(data, dict) else None


def _grid_from_cells(root: Path) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for _, record in cell_records(root):
        for key, value in record["combo"].items():
            values = grid.setdefault(key, [])
            if value not in values:
                values.append(value)
    return grid


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _build(root: Path, grid: Mapping[str, list[Any]], run_id: str | None) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*grid.values()):
        as_dict = dict(zip(grid, combo, strict=True))
        cells[combo_id(as_dict)] = {"combo": as_dict, "status": "pending", "dir": None}
    for cell_dir, record in cell_records(root):
        entry = {
            "combo": record["combo"],
            "status": record.get("status", "pending"),
            "dir": cell_dir.name,
            "attempt": record.get("attempt", 0),
        }
        if record.get("error"):
            entry["error"] = record["error"]
        if record.get("reason"):
            entry["reason"] = record["reason"]
        cells[combo_id(record["combo"])] = entry
    return {
        "schema": 1,
        "params": list(grid),
        "grid": {k: list(v) for k, v in grid.items()},
        "run_id": run_id,
        "updated": _now(),
        "cells": cells,
    }


def write_manifest(root: Path, *, grid: Mapping[str, list[Any]], run_id: str) -> dict[str, Any]:
    """Write the manifest of a run about to start (cells without sidecars are pending)."""
    manifest = _build(root, grid, run_id)
    write_json_atomic(root / MANIFEST_FILE, manifest)
    return manifest


def manifest_from_cells(root: Path) -> dict[str, Any]:
    """The manifest as the cell sidecars tell it (the grid from the old manifest, or, when
    that is lost, from the cells themselves), without writing it: readers only read."""
    old = read_manifest(root)
    grid = old["grid"] if old and isinstance(old.get("grid"), dict) else _grid_from_cells(root)
    return _build(root, grid, old.get("run_id") if old else None)


def rebuild_manifest(root: Path) -> dict[str, Any]:
    """Rebuild the manifest from the cell sidecars and write it (the driver's cache)."""
    manifest = manifest_from_cells(root)
    write_json_atomic(root / MANIFEST_FILE, manifest)
    return manifest


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ended(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """(new status, reason) for a ``running`` cell whose process is gone, else None."""
    import socket

    from mushin_box._slurm.jobs import is_live, job_state

    job_id = record.get("slurm_job_id")
    if job_id:
        state = job_state(str(job_id))
        if state is None or is_live(state):
            return None
        status = "timeout" if state.startswith(("TIMEOUT", "DEADLINE")) else "failed"
        return status, f"SLURM job {job_id} ended {state} while the cell was running"
    pid = record.get("pid")
    if record.get("host") == socket.gethostname() and isinstance(pid, int):
        if pid == os.getpid():
            return "failed", "interrupted while running"
        if not _pid_alive(pid):
            return "failed", f"process {pid} died while the cell was running"
    return None


def reconcile_abandoned(root: Path) -> list[str]:
    """Record cells left ``running`` by a process or SLURM job that has ended (killed,
    cancelled, preempted, timed out) as ``failed``/``timeout``; returns their dirs."""
    changed: list[str] = []
    for cell_dir, record in cell_records(root):
        if record.get("status") != "running":
            continue
        ended = _ended(record)
        if ended is None:
            continue
        status, reason = ended
        new = {**record, "status": status, "reason": reason, "ended": _now()}
        new["error"] = {"type": "JobEnded", "message": reason}
        write_json_atomic(cell_dir / STATUS_FILE, new)
        changed.append(cell_dir.name)
    return changed


def live_cells(root: Path) -> list[tuple[str, str]]:
    """(cell dir, SLURM job id) of cells still running in a live SLURM job."""
    from mushin_box._slurm.jobs import is_live, job_state

    out = []
    for cell_dir, record in cell_records(root):
        job_id = record.get("slurm_job_id")
        if record.get("status") == "running" and job_id:
            if is_live(job_state(str(job_id)) or ""):
                out.append((cell_dir.name, str(job_id)))
    return out

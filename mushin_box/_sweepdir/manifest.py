# SPDX-License-Identifier: MIT
"""The sweep root: its manifest (a cache rebuilt from the cell sidecars), its lock, and a
cell's place on the grid.

Readers put the cells of a sweep in the grid's order, then an earlier grid's cells by
directory, from the manifest's entries or from the status records, without encoding JSON
(:func:`in_grid_order`).

Examples
--------
>>> [e["combo"] for e in in_grid_order({"x": [1, 2]}, [{"combo": {"x": 2}, "dir": "x=2"}])]
[{'x': 1}, {'x': 2}]
"""

from __future__ import annotations

import fcntl
import itertools
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from mushin_box._core import layout
from mushin_box._core.errors import MushinBoxError
from mushin_box._core.gcpause import gc_paused
from mushin_box._core.sidecars import (
    canonical_dumps,
    read_json,
    timestamp,
    warn_sidecar,
    write_json_atomic,
)
from mushin_box._core.targets import public
from mushin_box._slurm.jobs import job_state
from mushin_box._sweepdir.liveness import check, owner_of


def combo_id(combo: Mapping[str, Any]) -> str:
    """A canonical text identity of a cell's swept values (keys sorted).

    >>> combo_id({"lr": 0.1, "a": True}), combo_id({"lr": 0.1, "a": 1})
    ('{"a":true,"lr":0.1}', '{"a":1,"lr":0.1}')
    >>> [combo_id({"x": x}) for x in (0.0, -0.0, 0, [1], [True])]
    ['{"x":0.0}', '{"x":-0.0}', '{"x":0}', '{"x":[1]}', '{"x":[true]}']
    """
    # a launch asks for each cell's id ~8 times: kept, by each value's type and repr
    # (True == 1 and -0.0 == 0.0; their reprs differ)
    key = tuple((k, type(v), repr(v)) for k, v in combo.items())
    found = _IDS.get(key)
    if found is None:
        found = canonical_dumps(dict(combo)).decode("utf-8").rstrip("\n")
        if len(_IDS) >= 16384:
            _IDS.clear()
        _IDS[key] = found
    return found


_IDS: dict[tuple[tuple[str, type, str], ...], str] = {}


@public
class SweepBusyError(MushinBoxError, RuntimeError):
    """A run refused to start: another run holds the sweep's lock, or cells or jobs of the
    sweep still run or may (the message names them and what to do)."""


class SweepLock:
    """Only one ``run()`` at a time per sweep directory (an advisory ``flock``)."""

    def __init__(self, root: Path) -> None:
        self.path = root / layout.LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> SweepLock:
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SweepBusyError(
                f"another run() (or launch) is already using the sweep directory "
                f"{self.path.parent}: wait for it to finish (mushin-box wait DIR), or use "
                "another working_dir"
            ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


#: a status record's fields and the types a reader relies on; another type there (a
#: hand-edited ``"attempt": "1x"``) has that field ignored, with a warning
_STATUS_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "attempt": (int,),
    "error": (dict,),
    "reason": (str,),
    "logs": (dict,),
    "host": (str,),
    "pid": (int,),
    "pid_start": (str,),
    "slurm_job_id": (str, int),
    "started": (str,),
    "ended": (str,),
    "duration_s": (int, float),
    "run_id": (str,),
}


def _warn(path: str, problem: str) -> None:
    warn_sidecar(f"sidecar {path!r} {problem}")


def wrong_status_fields(record: Mapping[str, Any]) -> dict[str, str]:
    """The fields of a status record of a type a reader does not rely on, with their type.

    >>> wrong_status_fields({"attempt": "1x", "pid": True, "status": "completed"})
    {'attempt': 'str', 'pid': 'bool'}
    """
    return {
        key: type(value).__name__
        for key, types in _STATUS_TYPES.items()
        if (value := record.get(key)) is not None
        and (not isinstance(value, types) or isinstance(value, bool))
    }


def read_status(cell_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A cell's status record (a JSON object with a ``combo`` object), its fields of the
    wrong type dropped; None when there is none, or (warned) when it is not one."""
    path = os.path.join(cell_dir, layout.STATUS_FILE)
    record = read_json(path)
    if record is None:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("combo"), dict):
        _warn(path, "is not a cell status (a JSON object with a 'combo' object); ignored")
        return None
    if wrong := wrong_status_fields(record):
        said = ", ".join(f"{key} (a {kind})" for key, kind in wrong.items())
        _warn(path, f"has fields of the wrong type, ignored: {said}")
        record = {k: v for k, v in record.items() if k not in wrong}
    return record


def _linked_cell(root: Path, name: str) -> None:
    """Warn when ``name`` under ``root`` is a symlink to a cell: not followed."""
    link = root / name
    try:
        if not link.is_symlink() or not (link / layout.STATUS_FILE).exists():
            return
    except OSError:  # a loop
        return
    _warn(str(link), "is a symbolic link to a cell directory, not followed; ignored")


_SUSPECT = (
    "is a suspect cell directory: its name holds control or invisible characters, which no "
    "cell's name has (a copy named to pass for a cell?); not read: delete or rename it"
)


def cell_records(
    root: Path, known: Mapping[str, dict[str, Any]] | None = None
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(cell dir, status record) for every real directory of ``root`` with a readable status
    (``known``: records by name still what the files say, not read again). A name that is
    not printable is a suspect, warned and not read: it would pass for another cell."""
    try:  # not Path.glob: a launch scans a 1,000-cell sweep 3 times
        with os.scandir(root) as entries:
            found = sorted((entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name, is_dir in found:
        if name.startswith("."):  # the sweep's own (.mushin, .submitit): no cell's name
            continue
        if not is_dir:
            _linked_cell(root, name)
            continue
        if not name.isprintable():
            if os.path.lexists(os.path.join(root, name, layout.STATUS_FILE)):
                warn_sidecar(f"{str(root / name)!r} {_SUSPECT}")
            continue
        record = known.get(name) if known else None
        if record is None:
            record = read_status(os.path.join(root, name))  # missing: None
        if record is not None:
            yield root / name, record


def is_sweep_dir(path: Path) -> bool:
    """Is ``path`` the working directory of a sweep? It holds the manifest, or a cell's
    status one level down (a manifest not written yet, or lost).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     empty = is_sweep_dir(Path(d))
    ...     (Path(d) / "lr=0.1").mkdir()
    ...     _ = (Path(d) / "lr=0.1" / layout.STATUS_FILE).write_text("{}")
    ...     empty, is_sweep_dir(Path(d)), is_sweep_dir(Path(d) / "lr=0.1")
    (False, True, False)
    """
    return (path / layout.MANIFEST_FILE).is_file() or any(path.glob(f"*/{layout.STATUS_FILE}"))


def read_sweep_manifest(root: Path) -> dict[str, Any] | None:
    """The sweep's manifest; None when there is none, or (warned) when it is not one:
    readers then rebuild it from the cells."""
    path = root / layout.MANIFEST_FILE
    data = read_json(path)
    if data is None:
        return None
    grid = data.get("grid") if isinstance(data, dict) else None
    if not (
        isinstance(data, dict)
        and data.get("schema", 1) == 1
        and isinstance(grid, dict)
        and all(isinstance(values, list) for values in grid.values())
        and isinstance(data.get("cells", {}), dict)
        and isinstance(data.get("run_id"), str | None)
        and isinstance(data.get("launcher"), str | None)
    ):
        _warn(
            str(path), "is not a sweep manifest (schema 1, a grid of lists); rebuilt from the cells"
        )
        return None
    return data


Records = Sequence[tuple[Path, dict[str, Any]]]


def _grid_from_cells(records: Records) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for _, record in records:
        for key, value in record["combo"].items():
            values = grid.setdefault(key, [])
            if value not in values:
                values.append(value)
    return grid


def _entry(name: str, record: Mapping[str, Any]) -> dict[str, Any]:
    entry = {
        "combo": record["combo"],
        "status": record.get("status", "pending"),
        "dir": name,
        "attempt": record.get("attempt", 0),
    }
    entry.update((key, record[key]) for key in ("error", "reason") if record.get(key))
    said = ("restarts", "restarts_left", "restarted_after", "limits")  # show says them
    entry.update((key, record[key]) for key in said if record.get(key) is not None)
    return entry


def _updated(
    base: Mapping[str, Any], records: Records, same: Mapping[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """``base`` with the entries of the cells whose record is not in ``same`` made again:
    what :func:`_build` gives, without an id for each cell of the grid; None when a
    directory went away or two share a combo (only a rebuild says which wins)."""
    cells = dict(base["cells"])
    names = {cell_dir.name for cell_dir, _ in records}
    if any(e["dir"] is not None and e["dir"] not in names for e in cells.values()):
        return None
    for cell_dir, record in records:
        if same.get(cell_dir.name) is record:
            continue
        key = combo_id(record["combo"])
        if key in cells and cells[key]["dir"] not in (None, cell_dir.name):
            return None
        cells[key] = _entry(cell_dir.name, record)
    return {**base, "updated": timestamp(), "cells": cells}


def _build(records: Records, grid: Mapping[str, list[Any]], run_id: str | None) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*grid.values()):
        as_dict = dict(zip(grid, combo, strict=True))
        cells[combo_id(as_dict)] = {"combo": as_dict, "status": "pending", "dir": None}
    for cell_dir, record in records:
        cells[combo_id(record["combo"])] = _entry(cell_dir.name, record)
    return {
        "schema": 1,
        "params": list(grid),
        "grid": {k: list(v) for k, v in grid.items()},
        "run_id": run_id,
        "updated": timestamp(),
        "cells": cells,
    }


def write_manifest(
    root: Path, *, grid: Mapping[str, list[Any]], run_id: str, records: Records
) -> dict[str, Any]:
    """Write the manifest of a run about to start from the cells' ``records`` (cells
    without one are pending)."""
    manifest = _build(records, grid, run_id)
    write_json_atomic(root / layout.MANIFEST_FILE, manifest)
    return manifest


def manifest_from_cells(
    root: Path, records: Records | None = None, grid: Mapping[str, list[Any]] | None = None
) -> dict[str, Any]:
    """The manifest as the cells' status ``records`` tell it (read when None), without
    writing it; ``grid``: instead of the old manifest's, or when that is lost, the cells'."""
    records = list(cell_records(root)) if records is None else records
    old = read_sweep_manifest(root) or {}  # a manifest it returns has a grid
    if grid is None:
        grid = old["grid"] if old else _grid_from_cells(records)
    built = _build(records, grid or {}, old.get("run_id"))
    before = old.get("cells")
    if isinstance(before, dict):  # a cell cancelled before it started has no status file
        for key, entry in built["cells"].items():
            was = before.get(key)
            if entry["dir"] is None and isinstance(was, dict) and was.get("status") == "cancelled":
                entry.update(status="cancelled", reason=str(was.get("reason") or "cancelled"))
    return built


def _unstarted(manifest: Mapping[str, Any], root: Path) -> list[dict[str, Any]]:
    """The entries of cells that never started: pending, with no directory, now or on disk."""
    known = (read_sweep_manifest(root) or {}).get("cells") or {}
    return [
        entry
        for key, entry in manifest["cells"].items()
        if entry["dir"] is None
        and entry["status"] == "pending"
        and not (isinstance(known.get(key), dict) and known[key].get("dir"))
    ]


def mark_unstarted_cancelled(
    root: Path, reason: str, only: Sequence[Mapping[str, Any]] | None, records: Records
) -> list[dict[str, Any]]:
    """Record the cells that never started as ``cancelled`` in the manifest and return
    their combos (``only``: of these combos alone); ``cancel`` calls it once no job of the
    sweep is queued and every status was read (``records``, not read again). Each rebuild
    keeps the mark (the manifest alone knows a cell without a directory); the next run's
    manifest drops it. Under the sweep's lock: ``SweepBusyError`` while a driver, which may
    start the cell, holds it.
    """
    if not _unstarted(manifest_from_cells(root, records), root):
        return []  # nothing to write: not even the lock file
    wanted = None if only is None else {combo_id(c) for c in only}
    with SweepLock(root):
        manifest = manifest_from_cells(root)
        found = [
            e
            for e in _unstarted(manifest, root)
            if wanted is None or combo_id(e["combo"]) in wanted
        ]
        for entry in found:
            entry.update(status="cancelled", reason=reason)
        if found:
            manifest["updated"] = timestamp()
            write_json_atomic(root / layout.MANIFEST_FILE, manifest)
    return [dict(entry["combo"]) for entry in found]


def write_grid(root: Path, grid: Mapping[str, list[Any]]) -> dict[str, Any]:
    """Write the manifest again with ``grid`` (a resume of named cells ran a narrowed one),
    under the sweep's lock."""
    with SweepLock(root):
        manifest = manifest_from_cells(root, grid=grid)
        write_json_atomic(root / layout.MANIFEST_FILE, manifest)
    return manifest


def rebuild_manifest(root: Path, records: Records) -> dict[str, Any]:
    """Rebuild the manifest from the cells' status records and write it."""
    manifest = manifest_from_cells(root, records)
    write_json_atomic(root / layout.MANIFEST_FILE, manifest)
    return manifest


def reconcile_abandoned(records: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Record cells left ``running`` by a process or SLURM job that has ended as
    ``failed``/``timeout``; returns their dirs. Each one's entry of ``records`` is replaced
    by its new record: the list stays what the files say."""
    ask = cache(job_state)  # one question per job, however many cells it runs
    changed: list[str] = []
    for i, (cell_dir, record) in enumerate(records):
        # no owner: a status from before owners were recorded, cannot tell
        owner = owner_of(record) if record.get("status") == "running" else None
        answer = check(owner, job_state=ask) if owner is not None else None
        if answer is None or answer.alive:
            continue
        timeout = (answer.job_state or "").startswith(("TIMEOUT", "DEADLINE"))
        new = {**record, "status": "timeout" if timeout else "failed", "reason": answer.reason}
        new.update(ended=timestamp(), error={"type": "JobEnded", "message": answer.reason})
        write_json_atomic(cell_dir / layout.STATUS_FILE, new)
        records[i] = (cell_dir, new)
        changed.append(cell_dir.name)
    return changed


@gc_paused()  # a bulk read: see _core/gcpause.py
def finish_launch(
    root: Path,
    error: BaseException | None,
    untouched: Mapping[str, dict[str, Any]] | None = None,
    written: Records | None = None,
    base: Mapping[str, Any] | None = None,
) -> tuple[list[str], list[tuple[Path, dict[str, Any]]] | None]:
    """After a launch: record abandoned cells (:func:`reconcile_abandoned`) and rebuild the
    manifest; return the cells recorded ended and the records now (None if unreadable).
    ``untouched``: the records of cells the launch left out, by name; ``written`` and
    ``base``: the records the manifest on disk was written from under this lock, and that
    manifest (its entries of ``untouched`` cells kept, not written again when unchanged).
    A failure to write (a full disk) is added to the launch's error as a note, else warned.
    """
    ended: list[str] = []
    records = None
    try:
        records = list(cell_records(root, untouched))  # each status file read once
        ended = reconcile_abandoned(records)
        if ended or written is None or records != list(written):
            manifest = _updated(base, records, untouched or {}) if base is not None else None
            if manifest is None:
                rebuild_manifest(root, records)
            else:
                write_json_atomic(root / layout.MANIFEST_FILE, manifest)
    except OSError as exc:
        message = f"the sweep's records could not be updated ({exc}); the next run updates them"
        if error is not None:
            error.add_note(message)
        else:
            warnings.warn(message, stacklevel=4)  # at the caller of Workflow.run
    return ended, records


def live_cells(records: Records) -> list[tuple[str, Any]]:
    """(cell dir, :class:`~mushin_box._sweepdir.liveness.Owner`) of the ``running`` cells
    whose owner is alive, or cannot be checked from here."""
    ask = cache(job_state)  # one question per job, however many cells it runs
    running = [(d.name, owner_of(r)) for d, r in records if r.get("status") == "running"]
    return [(name, o) for name, o in running if o is not None and check(o, job_state=ask).alive]


#: the launcher of a submission's ``cluster`` (``mushin_jobs.json``)
_CLUSTER_LAUNCHERS = {"slurm": "mushin_slurm", "local": "mushin_local"}


#: the most cells :func:`ran_experiment` reads a provenance record of
_EXPERIMENT_READS = 8


def ran_experiment(root: Path) -> tuple[str, str] | None:
    """(cell directory, experiment file) as the first of the manifest's first few completed
    cells records what it ran (provenance's ``run.experiment.file``); None when none does.
    One cell answers for the sweep: a launch's cells all run the experiment it was given."""
    cells = (read_sweep_manifest(root) or {}).get("cells")
    entries = [e for e in cells.values() if isinstance(e, dict)] if cells else []
    names = [e.get("dir") for e in entries if e.get("status") == "completed"]
    done = [n for n in names if isinstance(n, str) and n and os.sep not in n and n != ".."]
    for name in done[:_EXPERIMENT_READS]:
        record = read_json(root / name / layout.PROVENANCE_FILE)
        run = record.get("run") if isinstance(record, dict) else None
        experiment = run.get("experiment") if isinstance(run, dict) else None
        file = experiment.get("file") if isinstance(experiment, dict) else None
        if isinstance(file, str):
            return name, file
    return None


def recorded_launcher(root: Path) -> str | None:
    """The Hydra launcher that ran the sweep: the manifest's, else the launch record's,
    else the latest submission's cluster; None when none says.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> recorded_launcher(root) is None
    True
    >>> write_json_atomic(root / layout.JOBS_FILE, {"cluster": "slurm", "jobs": []})
    >>> recorded_launcher(root)
    'mushin_slurm'
    """
    manifest = read_sweep_manifest(root) or {}
    if isinstance(manifest.get("launcher"), str):
        return manifest["launcher"]
    for name in (layout.LAUNCH_FILE, layout.JOBS_FILE):
        data = read_json(root / name) if (root / name).is_file() else None
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("launcher"), str):
            return data["launcher"]
        if data.get("cluster") in _CLUSTER_LAUNCHERS:
            return _CLUSTER_LAUNCHERS[data["cluster"]]
    return None


def grid_ids(grid: Mapping[str, Sequence[Any]]) -> set[str]:
    """The :func:`combo_id` of every cell of ``grid`` (a sweep of nothing has one cell).

    >>> sorted(grid_ids({"x": [1, 2]})), grid_ids({})
    (['{"x":1}', '{"x":2}'], {'{}'})
    """
    return {
        combo_id(dict(zip(grid, values, strict=True)))
        for values in itertools.product(*grid.values())
    }


#: a cell as the manifest (or its status file) tells it
Entry = dict[str, Any]


def grid_key(combo: Mapping[str, Any], params: Sequence[str]) -> tuple[Any, ...] | None:
    """A cell's place on a grid of ``params``, told apart as ``combo_id`` tells, without
    encoding JSON. None: the cell swept other keys (an earlier grid).

    >>> grid_key({"b": 1, "a": True}, ["a", "b"]) == grid_key({"a": 1, "b": 1}, ["a", "b"])
    False
    >>> grid_key({"a": 1, "c": 2}, ["a", "b"]) is None
    True
    """
    if not isinstance(combo, Mapping) or len(combo) != len(params):
        return None
    try:
        return tuple(_one(combo[p]) for p in params)
    except KeyError:
        return None


#: values equal only when the same (a float is told by its repr: -0.0 == 0.0, nan != nan)
_EXACT = frozenset({int, str, bool, type(None)})


def _one(value: Any) -> tuple[type, Any]:
    kind = type(value)
    if kind in _EXACT:
        return kind, value
    if kind is float:
        return kind, repr(value)
    return kind, canonical_dumps(value).decode("utf-8")


def grid_keys(grid: Mapping[str, Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
    """The :func:`grid_key` of every point of ``grid``, in its order.

    >>> list(grid_keys({"x": [1, 2]})) == [grid_key({"x": v}, ["x"]) for v in (1, 2)]
    True
    """
    return itertools.product(*([_one(v) for v in values] for values in grid.values()))


def in_grid_order(
    grid: Mapping[str, Sequence[Any]], entries: Iterable[Entry]
) -> list[Entry] | None:
    """``entries`` in ``read_sweep``'s order: every point of ``grid`` (a pending entry
    where none is), then the entries off the grid by directory; of two at one place, the
    later. None: an entry that is not an object with a ``combo`` object."""
    params = list(grid)
    by_key: dict[tuple[Any, ...], Entry] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("combo"), dict):
            return None
        key = grid_key(entry["combo"], params)
        by_key[key if key is not None else ("off", repr(entry["combo"]))] = entry
    out = []
    for key, values in zip(grid_keys(grid), itertools.product(*grid.values()), strict=True):
        entry = by_key.pop(key, None)
        if entry is None:
            entry = {"combo": dict(zip(params, values, strict=True)), "status": "pending"}
        out.append(entry)
    rest = [e for e in by_key.values() if isinstance(e.get("dir"), str)]
    return out + sorted(rest, key=lambda e: e["dir"])

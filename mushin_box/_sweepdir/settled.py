# SPDX-License-Identifier: MIT
"""A finished sweep read without opening every file: from its manifest for the readers
(``status``, ``show``, ``report``, ``load_experiment``), from the finished cells' index for a
resume.

The manifest, written after the last cell ended, answers for a finished sweep: a status is
read only when newer than it or not completed (its error is whole there only). A cell it
does not know, a symlink among the cells, a cell not ended, a driver holding the lock or a
newer submission: :func:`finished_entries` says None and the reader reads every status.

The index: at a launch's end, under the lock, the driver writes each completed cell's
status, metrics and whether its provenance is whole, with each file's identity (inode,
size, mtime, ctime: no user can set ``st_ctime``). A resume opens each file
(``O_NOFOLLOW``, relative to the cell's directory opened the same way: an open revalidates
a shared file system's cached attributes, a ``stat`` may not) and decides from the index
a cell whose files are all the indexed ones. It is trusted only as a regular, bounded, well
formed file owned by the owner of every file it vouches for (a user who can drop a file in
a shared sweep cannot make a resume believe other results). A file changed within a
timestamp's granularity after it was read may keep its identity (git's "racy" entries): it
is entered only if last changed :data:`RACY_NS` before the file system's now.

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

import contextlib
import json
import os
import secrets
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core import layout
from mushin_box._core.gcpause import gc_paused
from mushin_box._core.layout import read_limit
from mushin_box._core.safeio import read_open
from mushin_box._core.sidecars import loads, write_bytes_atomic
from mushin_box._slurm.submitted import job_ids, read_submission
from mushin_box._sweepdir.board import (
    VIEW_STATES,
    SweepView,
    cell_view,
    driver_running,
    local_jobs_alive,
    resubmitted,
)
from mushin_box._sweepdir.manifest import (
    Entry,
    grid_key,
    in_grid_order,
    read_status,
    read_sweep_manifest,
    wrong_status_fields,
)


def _subdirs(root: Path) -> set[str] | None:
    """The real directories of ``root``; None when a symlink is among its entries."""
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


def finished_entries(root: str | os.PathLike[str]) -> tuple[dict[str, Any], list[Entry]] | None:
    """The manifest and every cell's entry of a finished sweep, each status file read only
    where the manifest is older than it; None when the manifest cannot answer (module doc)."""
    path = Path(root)
    base = os.fspath(path)
    written = _mtime(os.path.join(base, layout.MANIFEST_FILE))
    if written is None or driver_running(path):
        return None
    jobs = _mtime(os.path.join(base, layout.JOBS_FILE))
    if jobs is not None and jobs >= written:  # a submission the manifest may not know
        return None
    manifest = read_sweep_manifest(path)
    if manifest is None or not isinstance(manifest.get("cells"), dict):
        return None
    if any(  # a cell that may still start: a run's first manifest
        isinstance(e, dict) and e.get("dir") is None and e.get("status") != "cancelled"
        for e in manifest["cells"].values()
    ):
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
        changed = _mtime(os.path.join(cell, layout.STATUS_FILE))
        # newer than the manifest, or not completed (its error is whole there): read it
        if changed is None or changed >= written or entry.get("status") != "completed":
            record = read_status(cell)
            if record is None or grid_key(record["combo"], params) != grid_key(
                entry["combo"], params
            ):
                return None
            entries[at] = entry = {**record, "dir": name}
        if entry.get("status") not in layout.DONE_CELL_STATES:
            return None
    for name in dirs - seen:  # a cell the manifest does not know
        if os.path.lexists(os.path.join(base, name, layout.STATUS_FILE)):
            return None
    return manifest, entries


@attrs.frozen
class Heading:
    """A finished sweep's first line, known before any cell's own file is read: its
    directory, its cells by state (as ``SweepView.counts``) and its launcher."""

    root: Path
    launcher: str | None
    states: tuple[str, ...]

    def counts(self) -> dict[str, int]:
        found = Counter(self.states)
        return {s: found[s] for s in VIEW_STATES if s in found}


def bare_view(
    root: Path, manifest: Mapping[str, Any], entries: Sequence[Entry], **fields: Any
) -> tuple[Any, Heading]:
    """The sweep's ``SweepView`` as the manifest tells it (``fields``: more of the view's)
    without its cells, and its :class:`Heading`."""
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
    """A finished sweep as ``read_sweep`` gives it; None when the manifest cannot answer or
    a job of the latest submission may run a cell again. ``heading``: called with its
    :class:`Heading` before any cell's own file is read (a first line printed at once)."""
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


#: the files an entry vouches for, in the order of its identities
_FILES = (layout.STATUS_FILE, layout.METRICS_FILE, layout.PROVENANCE_FILE)
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: a file changed less than this before the index was begun is not entered (see the doc)
RACY_NS = 1_000_000_000
_SCHEMA = 1
#: the index is written again once this share of its cells (1/N) is added or dropped
_REWRITE_SHARE = 100

#: a file's inode, size, mtime and ctime (ns), as a list (JSON's)
Identity = list[int]


@attrs.frozen
class IndexEntry:
    """A completed cell as the index holds it: its status, its metrics, and the identities
    of its :data:`_FILES`."""

    status: dict[str, Any]
    metrics: dict[str, Any]
    files: tuple[Identity, ...]


@attrs.frozen
class CellIndex:
    """The entries of the index whose files are unchanged, by cell directory name;
    ``stale``: the file could not be used, so it is worth writing again; ``unused``: how
    many of its entries were not (they count towards a rewrite like cells dropped)."""

    entries: Mapping[str, IndexEntry] = attrs.field(factory=dict)
    stale: bool = False
    unused: int = 0

    def records(self) -> dict[str, dict[str, Any]]:
        """The status records, by directory name (``cell_records``'s ``known``)."""
        return {name: entry.status for name, entry in self.entries.items()}

    def metrics(self) -> dict[str, dict[str, Any]]:
        """The metrics, by directory name."""
        return {name: entry.metrics for name, entry in self.entries.items()}


def whole_provenance(record: Any) -> bool:
    """Is ``record`` a provenance record a completed cell can be reused with?

    >>> whole_provenance({"reproducibility": {}, "run": {}}), whole_provenance({"run": {}})
    (True, False)
    """
    return isinstance(record, dict) and {"reproducibility", "run"} <= set(record)


def _identity(st: os.stat_result) -> Identity:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


@contextlib.contextmanager
def _opened(path: str | Path, flags: int, dir_fd: int | None = None) -> Iterator[int]:
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


@gc_paused()  # a bulk read: see _core/gcpause.py
def read_index(root: Path) -> CellIndex:
    """The entries of ``root``'s index whose files are still the ones indexed; an empty
    index when there is none, or it is not to be trusted (module doc)."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return CellIndex()
    try:
        found = _load(root_fd)
        if found is None:  # a corrupt or refused one is written again
            return CellIndex(stale=os.path.lexists(root / layout.CELL_INDEX_FILE))
        cells, owner = found
        entries = {}
        for name, raw in cells.items():
            entry = _entry(name, raw)
            if entry is not None and _unchanged(root_fd, name, entry.files, owner):
                entries[name] = entry
        return CellIndex(entries, unused=len(cells) - len(entries))
    finally:
        os.close(root_fd)


def _load(root_fd: int) -> tuple[dict[str, Any], int] | None:
    """The index's cells and its owner's uid; None when missing or not to be trusted."""
    try:
        with _opened(layout.CELL_INDEX_FILE, _OPEN, root_fd) as fd:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            data = json.loads(read_open(fd, read_limit(layout.CELL_INDEX_FILE)) or b"")
    except (OSError, ValueError, RecursionError):  # missing, corrupt or hostile
        return None
    if not (isinstance(data, dict) and data.get("schema") == _SCHEMA):
        return None
    cells = data.get("cells")
    return (cells, st.st_uid) if isinstance(cells, dict) else None


def _entry(name: Any, raw: Any) -> IndexEntry | None:
    """An index entry as :class:`IndexEntry`, None unless it is well formed."""
    if not (isinstance(name, str) and name not in ("", ".", "..") and isinstance(raw, dict)):
        return None
    if "/" in name or "\0" in name:
        return None
    files, status, metrics = raw.get("files"), raw.get("status"), raw.get("metrics")
    # identities are only compared with a stat's: anything else compares unequal
    if not (isinstance(files, list) and len(files) == len(_FILES) and isinstance(metrics, dict)):
        return None
    if not isinstance(status, dict) or status.get("status") != "completed":
        return None
    if not isinstance(status.get("combo"), dict) or wrong_status_fields(status):
        return None
    return IndexEntry(status, metrics, tuple(files))


def _unchanged(root_fd: int, name: str, files: Iterable[Identity], owner: int) -> bool:
    """Are the cell's files the ones indexed: regular files of the index's owner, with
    the same identities (each opened, not followed)?"""
    try:
        with _opened(name, _OPEN_DIR, root_fd) as cell_fd:
            for file, want in zip(_FILES, files, strict=True):
                with _opened(file, _OPEN, cell_fd) as fd:
                    st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != owner or _identity(st) != want:
                    return False
    except OSError:
        return False
    return True


@gc_paused()  # a bulk read: see _core/gcpause.py
def refresh_index(root: Path, records: Iterable[tuple[Path, Any]], index: CellIndex) -> bool:
    """Write ``root``'s index of the completed cells of ``records`` (read after the launch,
    under the lock), keeping ``index``'s unchanged entries and reading the others' files;
    False (not written) when under 1% of its cells would change."""
    kept: dict[str, IndexEntry] = {}
    todo: list[tuple[str, dict[str, Any]]] = []
    for cell_dir, record in records:
        if not isinstance(record, dict) or record.get("status") != "completed":
            continue
        old = index.entries.get(cell_dir.name)
        if old is not None and (old.status is record or old.status == record):
            kept[cell_dir.name] = old
        else:
            todo.append((cell_dir.name, record))
    dropped = len(index.entries) - len(kept) + index.unused
    if not todo and not dropped and not index.stale:
        return False
    added = _read_cells(root, todo) if todo else {}
    # a few cells more or less are read from their files next time rather than the whole
    # index (~1 KB a cell) rewritten for them
    if not index.stale and len(added) + dropped < max(1, len(kept) // _REWRITE_SHARE):
        return False
    cells = {
        name: {"files": list(e.files), "status": e.status, "metrics": e.metrics}
        for name, e in sorted({**kept, **added}.items())
    }
    data = json.dumps({"schema": _SCHEMA, "cells": cells}, separators=(",", ":"))
    write_bytes_atomic(root / layout.CELL_INDEX_FILE, data.encode("utf-8"))
    return True


def _read_cells(root: Path, todo: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, IndexEntry]:
    """An entry for each cell of ``todo`` (name, status record) whose files can be entered:
    unchanged while read, and last changed :data:`RACY_NS` before the file system's now."""
    now, owner = _fs_clock(root)
    out = {}
    with _opened(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) as root_fd:
        for name, record in todo:
            entry = _read_cell(root_fd, name, now - RACY_NS, owner)
            if entry is not None and entry.status == record:
                out[name] = attrs.evolve(entry, status=record)
    return out


def _fs_clock(root: Path) -> tuple[int, int]:
    """The file system's now (a new file's ctime) and the owner it gives this process's
    files (root squashed to nobody, on NFS)."""
    probe = root / f".mushin_clock.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
    return st.st_ctime_ns, st.st_uid


def _read_cell(root_fd: int, name: str, before: int, owner: int) -> IndexEntry | None:
    """The cell's entry, read from its files; None when one is missing, unreadable, not
    ``owner``'s, changed since ``before`` or while read, or not what a reuse needs."""
    seen, values = [], []
    try:
        with _opened(name, _OPEN_DIR, root_fd) as cell_fd:
            for file in _FILES:
                with _opened(file, _OPEN, cell_fd) as fd:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode) or st.st_uid != owner:
                        return None
                    if max(st.st_mtime_ns, st.st_ctime_ns) >= before:
                        return None
                    data = read_open(fd, read_limit(file))
                if data is None:
                    return None
                seen.append(_identity(st))
                values.append(loads(data))
            for file, ids in zip(_FILES, seen, strict=True):  # not replaced while read
                if _identity(os.stat(file, dir_fd=cell_fd, follow_symlinks=False)) != ids:
                    return None
    except (OSError, ValueError, RecursionError):
        return None
    status, metrics, provenance = values
    if not whole_provenance(provenance):
        return None
    return _entry(name, {"files": seen, "status": status, "metrics": metrics})

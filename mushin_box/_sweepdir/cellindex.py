# SPDX-License-Identifier: MIT
"""The finished cells' index: a resume of 10,000 finished cells reads one file, not 30,000.

Design note: a resume decides a finished cell from its status record, its metrics and
whether its provenance record is whole (``prefilter._reusable``, as the runner does); read
from each cell, that is 30,000 files at 10,000 cells, a third of the resume. The driver
that ran (or resumed) the sweep writes down, at the end of its launch and under the
sweep's lock, what it read of each completed cell (the status record, the metrics) with
the identity of each of the three files it read them from: inode, size, mtime and ctime
(``st_ctime`` changes with any write, rename or ``utime``, and no user can set it). The
next resume opens each of those files (``O_NOFOLLOW``, relative to the cell's directory,
itself opened without following a symlink; an open revalidates a shared file system's
cached attributes, where a ``stat`` may not) and compares their identities: a cell whose
files are all the ones indexed is decided from the index, exactly as from its files
(``decide`` is asked the same question with the same record); any other cell, one of its
files deleted, replaced, edited, truncated, or not a regular file, is read from its
files, as before. So the rule for reusing a cell is unchanged; only where its unchanged
files' content is read from is.

What the index is trusted for: it is the driver's own cache, beside the cells, read only
when it is a regular file (not a symlink), within its size limit, well formed, and owned
by the owner of every file it vouches for (a user who can drop a file in a shared sweep
directory but not rewrite its cells cannot make a resume believe other results). Its
content is taken at its word as far as the files it names are unchanged: whoever could
forge it with the right identities could as well rewrite those files, which the full
check would then accept. Anything else in it (a corrupt, oversized or foreign file, an
entry that is not a completed status, a name with a ``/``) is ignored, and the cells are
read from their files.

A file changed within a timestamp's granularity after the driver read it could keep its
identity (git's "racy" entries): a file is entered only if it was last changed at least
:data:`RACY_NS` before the index was begun, by the file system's own clock (a probe file's
ctime), so that any later change gives it another ctime. The last cells of a run are
then read from their files by the next resume, which enters them.

It is written with :func:`json.dumps`, not the canonical writer: a private cache of
~1 KB a cell that no reader but this module opens, whose 10 MB at 10,000 cells the
canonical writer would read back to check (its plain path) or walk in Python (a NaN
metric); still atomically.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.gcpause import gc_paused
from mushin_box._core.layout import (
    CELL_INDEX_FILE,
    METRICS_FILE,
    PROVENANCE_FILE,
    STATUS_FILE,
    read_limit,
)
from mushin_box._core.sidecars import loads, write_bytes_atomic
from mushin_box._sweepdir.manifest import wrong_status_fields

__all__ = ["CellIndex", "Entry", "RACY_NS", "read_index", "refresh_index", "whole_provenance"]

#: the files an entry vouches for, in the order of its identities
_FILES = (STATUS_FILE, METRICS_FILE, PROVENANCE_FILE)
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
class Entry:
    """A completed cell as the index holds it: its status record, its metrics, and the
    identities (:func:`_identity`) of its status, metrics and provenance files."""

    status: dict[str, Any]
    metrics: dict[str, Any]
    files: tuple[Identity, ...]


@attrs.frozen
class CellIndex:
    """The entries of the index whose files are unchanged, by cell directory name;
    ``stale``: the file could not be used (corrupt, refused), so it is worth writing again;
    ``unused``: how many of its entries were not (a cell run again, or changed): they count
    towards its rewrite like cells dropped (:func:`refresh_index`)."""

    entries: Mapping[str, Entry] = attrs.field(factory=dict)
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


@gc_paused()  # a bulk read: see _core/gcpause.py
def read_index(root: Path) -> CellIndex:
    """The entries of ``root``'s index whose three files are still the ones indexed (see
    the module doc); an empty index when there is none, or it is not to be trusted."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return CellIndex()
    try:
        found = _load(root_fd)
        if found is None:  # a corrupt or refused one is written again
            return CellIndex(stale=os.path.lexists(root / CELL_INDEX_FILE))
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
        fd = os.open(CELL_INDEX_FILE, _OPEN, dir_fd=root_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        data = json.loads(_read_fd(fd, read_limit(CELL_INDEX_FILE)) or b"")
    except (OSError, ValueError, RecursionError):  # a corrupt or hostile file
        return None
    finally:
        os.close(fd)
    if not (isinstance(data, dict) and data.get("schema") == _SCHEMA):
        return None
    cells = data.get("cells")
    return (cells, st.st_uid) if isinstance(cells, dict) else None


def _read_fd(fd: int, limit: int) -> bytes | None:
    """All of an open file, None when it is over ``limit`` bytes (it may grow)."""
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(limit + 1 - total, 1 << 20))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    return None


def _entry(name: Any, raw: Any) -> Entry | None:
    """An index entry as :class:`Entry`, None unless it is well formed."""
    if not (isinstance(name, str) and name not in ("", ".", "..") and isinstance(raw, dict)):
        return None
    if "/" in name or "\0" in name:
        return None
    files, status, metrics = raw.get("files"), raw.get("status"), raw.get("metrics")
    # the identities are only compared with a stat's: anything but a list of 4 numbers
    # compares unequal
    if not (isinstance(files, list) and len(files) == len(_FILES)):
        return None
    if not (isinstance(status, dict) and isinstance(metrics, dict)):
        return None
    if status.get("status") != "completed" or not isinstance(status.get("combo"), dict):
        return None
    if wrong_status_fields(status):
        return None
    return Entry(status, metrics, tuple(files))


def _unchanged(root_fd: int, name: str, files: Iterable[Identity], owner: int) -> bool:
    """Are the cell's files the ones indexed: regular files of the index's owner, with
    the same identities? Each is opened, not followed if a symlink."""
    try:
        cell_fd = os.open(name, _OPEN_DIR, dir_fd=root_fd)
    except OSError:
        return False
    try:
        for file, want in zip(_FILES, files, strict=True):
            fd = os.open(file, _OPEN, dir_fd=cell_fd)
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != owner or _identity(st) != want:
                return False
        return True
    except OSError:
        return False
    finally:
        os.close(cell_fd)


@gc_paused()  # a bulk read: see _core/gcpause.py
def refresh_index(root: Path, records: Iterable[tuple[Path, Any]], index: CellIndex) -> bool:
    """Write ``root``'s index for the completed cells of ``records`` (their status records,
    read under the sweep's lock, after the launch), keeping ``index``'s entries whose
    record is unchanged and reading the others' files; nothing is written when less than
    1% of its cells would change (or none, in a sweep of under 100). Returns whether it
    was written. Call it under the sweep's lock."""
    kept: dict[str, Entry] = {}
    todo: list[tuple[str, dict[str, Any]]] = []
    for cell_dir, record in records:
        if not isinstance(record, dict) or record.get("status") != "completed":
            continue
        old = index.entries.get(cell_dir.name)
        if old is not None and (old.status is record or old.status == record):
            kept[cell_dir.name] = old
        else:
            todo.append((cell_dir.name, record))
    # a cell run again is dropped, and its new files entered: 10 cells of 10,000 run
    # again rewrite nothing (they are read from their files next time)
    dropped = len(index.entries) - len(kept) + index.unused
    if not todo and not dropped and not index.stale:
        return False
    added = _read_cells(root, todo) if todo else {}
    # a few cells more or less are read from their files by the next resume (~0.1 ms
    # each) rather than rewrite ~1 KB per cell for them (10 MB at 10,000 cells)
    if not index.stale and len(added) + dropped < max(1, len(kept) // _REWRITE_SHARE):
        return False
    cells = {
        name: {"files": list(e.files), "status": e.status, "metrics": e.metrics}
        for name, e in sorted({**kept, **added}.items())
    }
    data = json.dumps({"schema": _SCHEMA, "cells": cells}, separators=(",", ":"))
    write_bytes_atomic(root / CELL_INDEX_FILE, data.encode("utf-8"))
    return True


def _read_cells(root: Path, todo: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Entry]:
    """An entry for each cell of ``todo`` (name, status record) whose files can be entered:
    read now, unchanged while read, and changed before the file system's now less
    :data:`RACY_NS`."""
    now, owner = _fs_clock(root)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        out = {}
        for name, record in todo:
            entry = _read_cell(root_fd, name, now - RACY_NS, owner)
            if entry is not None and entry.status == record:
                out[name] = attrs.evolve(entry, status=record)
        return out
    finally:
        os.close(root_fd)


def _fs_clock(root: Path) -> tuple[int, int]:
    """The file system's now (the ctime of a file created now) and the owner it gives a
    file of this process (root squashed to nobody, on NFS)."""
    probe = root / f".mushin_clock.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
    return st.st_ctime_ns, st.st_uid


def _read_cell(root_fd: int, name: str, before: int, owner: int) -> Entry | None:
    """The cell's entry, read from its files (None: one is missing, unreadable, not this
    owner's, changed since ``before`` or while read, or not what a reuse needs)."""
    try:
        cell_fd = os.open(name, _OPEN_DIR, dir_fd=root_fd)
    except OSError:
        return None
    try:
        seen, values = [], []
        for file in _FILES:
            fd = os.open(file, _OPEN, dir_fd=cell_fd)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != owner:
                    return None
                if max(st.st_mtime_ns, st.st_ctime_ns) >= before:
                    return None
                data = _read_fd(fd, read_limit(file))
            finally:
                os.close(fd)
            if data is None:
                return None
            seen.append(_identity(st))
            values.append(loads(data))
        for file, ids in zip(_FILES, seen, strict=True):  # not replaced while read
            if _identity(os.stat(file, dir_fd=cell_fd, follow_symlinks=False)) != ids:
                return None
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(cell_fd)
    status, metrics, provenance = values
    if not (isinstance(status, dict) and isinstance(metrics, dict)):
        return None
    if not whole_provenance(provenance):
        return None
    return _entry(name, {"files": seen, "status": status, "metrics": metrics})

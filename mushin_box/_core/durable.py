# SPDX-License-Identifier: MIT
"""When an atomic write becomes durable: at once, or at the cell's commit points.

An atomic write survives a power loss only with an ``fsync`` of the file and of its
directory: two round trips a write on a network filesystem. A cell needs that only where a
later run trusts what it finds, its final status and what that vouches for (a lost
"running" status only runs the cell again). So inside :func:`deferred` a write is synced at
:func:`commit`, once per file and directory; the cell runner commits before it writes the
final status, and defers its own bookkeeping only, never the task's writes (:func:`immediate`).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_LOCAL = threading.local()  # one pending set per thread: a cell's writes are its thread's
_LATER: dict[str, None] = {}  # files handed on to the next deferred block (.hydra files)
_LOCK = threading.Lock()


def fsync_directory(directory: Path) -> None:
    """``fsync`` a directory, so that a rename in it is durable (where supported)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return  # platforms without directory handles (Windows): nothing to sync
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some file systems do not support fsync on directories.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    try:  # the file as it is now: a later write replaced the one remembered
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return  # moved or removed since: nothing of it to keep
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pending() -> dict[str, None] | None:
    return getattr(_LOCAL, "pending", None)


def deferring() -> bool:
    """Is a write in this thread to be remembered (:func:`remember`) rather than synced?"""
    return _pending() is not None


def remember(path: Path) -> None:
    """Note a write made without ``fsync`` (:func:`deferring`), for :func:`commit`."""
    _LOCAL.pending[str(path)] = None


def commit() -> None:
    """Sync the writes remembered in this thread's :func:`deferred` block; nothing is
    pending after it, even when it raises."""
    pending = _pending()
    if not pending:
        return
    files = list(pending)
    pending.clear()
    _sync(files)


def _sync(files: list[str], *quiet: type[Exception]) -> None:
    """Each file, then each directory, ``quiet`` errors passed over."""
    for path in files:
        with contextlib.suppress(*quiet):
            _fsync_file(path)
    for directory in dict.fromkeys(os.path.dirname(path) for path in files):
        with contextlib.suppress(*quiet):
            fsync_directory(Path(directory))


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within, this thread's atomic writes are synced at :func:`commit` and on leaving
    (a nested block joins the outer one). Writes handed on (:func:`handed_on`) join it.

    >>> import tempfile
    >>> from mushin_box._core.sidecars import write_json_atomic
    >>> target = Path(tempfile.mkdtemp()) / "status.json"
    >>> with deferred():
    ...     write_json_atomic(target, {"status": "running"})
    ...     deferring()
    True
    >>> deferring(), target.read_text()
    (False, '{"status":"running"}\\n')
    """
    if _pending() is not None:
        yield
        return
    _LOCAL.pending = pending = {}
    with _LOCK:
        pending.update(_LATER)
        _LATER.clear()
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):  # the error that ends the block is the one raised
            commit()
        raise
    else:
        commit()
    finally:
        _LOCAL.pending = None


@contextlib.contextmanager
def handed_on() -> Iterator[None]:
    """Within, this thread's writes are left to the next :func:`deferred` block in this
    process, or to its exit (Hydra's ``.hydra`` files, written just before the cell runner
    starts); inside a block, they are that block's."""
    if _pending() is not None:
        yield
        return
    _LOCAL.pending = pending = {}
    try:
        yield
    finally:
        _LOCAL.pending = None
        with _LOCK:
            _LATER.update(pending)


@contextlib.contextmanager
def immediate() -> Iterator[None]:
    """Within, this thread's writes are synced at once, inside a :func:`deferred` block
    too (the task a cell runs: its own files are its own affair)."""
    saved = _pending()
    _LOCAL.pending = None
    try:
        yield
    finally:
        _LOCAL.pending = saved


@atexit.register
def _sync_later() -> None:
    with _LOCK:
        files = list(_LATER)
        _LATER.clear()
    _sync(files, OSError)

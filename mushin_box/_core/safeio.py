# SPDX-License-Identifier: MIT
"""Bounded, no-symlink reads of the files in a sweep directory.

Anything in a sweep directory may be hostile (a sidecar symlinked to ``/dev/zero``, a FIFO, a
status naming ``/etc/shadow`` as a log). So a file must be a regular file, not a link, is
read up to its kind's limit, and a file a sidecar *names* must lie under the sweep directory
(:func:`inside`). A refusal is an :class:`UnsafeFileError`, an ``OSError``.

>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> _ = (d / "status.json").write_text('{"a":1}')
>>> read_bounded(d / "status.json", 100)
b'{"a":1}'
>>> (d / "link.json").symlink_to("/dev/zero")
>>> read_bounded(d / "link.json", 100)
Traceback (most recent call last):
...
mushin_box.UnsafeFileError: a symbolic link, not followed
>>> read_bounded(d / "status.json", 3)
Traceback (most recent call last):
...
mushin_box.UnsafeFileError: 7 bytes, over the 3-byte limit for this kind of file
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.targets import public

StrPath = str | os.PathLike[str]

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


@public
class UnsafeFileError(MushinBoxError, OSError):
    """A file a reader refuses: a symlink, not a regular file, over its size limit, or
    outside the directory it must be in. Its text is the problem alone (the caller names the
    file)."""


def open_regular_stat(path: StrPath) -> tuple[int, os.stat_result]:
    """An open read-only descriptor of the regular file ``path`` and its ``fstat``; anything
    else (a symlink, a FIFO, a device, a directory) is an :class:`UnsafeFileError`."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a symlink, or a loop above it
            raise UnsafeFileError("a symbolic link, not followed") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket; a directory on some systems
            raise UnsafeFileError(f"not a regular file ({exc.strerror})") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise UnsafeFileError(f"{kind}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read(fd: int, most: int, offset: int) -> bytes:
    """At most ``most`` bytes of ``fd`` from ``offset`` (fewer at the end of the file)."""
    chunks, total = [], 0
    while total < most:
        chunk = os.pread(fd, min(most - total, 1 << 20), offset + total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_open(fd: int, limit: int) -> bytes | None:
    """All of the open file ``fd``, None when it holds more than ``limit`` bytes."""
    data = _read(fd, limit + 1, 0)
    return data if len(data) <= limit else None


def read_bounded(path: StrPath, limit: int) -> bytes:
    """The whole of the regular file ``path`` (:func:`open_regular_stat`); an
    :class:`UnsafeFileError` past ``limit`` bytes, before reading or as it grows."""
    fd, st = open_regular_stat(path)
    try:
        data = read_open(fd, limit) if st.st_size <= limit else None
    finally:
        os.close(fd)
    if data is None:  # over the limit before reading (its size), or grown while read
        size = max(st.st_size, limit + 1)
        raise UnsafeFileError(f"{size} bytes, over the {limit}-byte limit for this kind of file")
    return data


def read_tail(path: StrPath, max_bytes: int, *, start: int = 0) -> tuple[bytes, int]:
    """At most the last ``max_bytes`` of the regular file ``path`` from offset ``start``, and
    the offset they begin at: a log is read from its end, however large it grew."""
    fd, st = open_regular_stat(path)
    try:
        offset = max(start, st.st_size - max_bytes, 0)
        return _read(fd, max_bytes, offset), offset
    finally:
        os.close(fd)


def inside(root: StrPath, path: StrPath) -> Path:
    """``path`` (relative to ``root`` unless absolute), when it lies under ``root`` once
    every symlink above its last component (left for :func:`open_regular_stat`) is resolved;
    else an :class:`UnsafeFileError`.

    >>> str(inside("/runs/lr", "/runs/lr/.submitit/7/7_0_log.out"))
    '/runs/lr/.submitit/7/7_0_log.out'
    >>> inside("/runs/lr", "/etc/shadow")
    Traceback (most recent call last):
    ...
    mushin_box.UnsafeFileError: outside the sweep directory /runs/lr, not read
    """
    base = Path(root).resolve()
    given = Path(root, path)
    parent = given.parent.resolve()
    if given.name in ("", ".", "..") or not parent.is_relative_to(base):
        raise UnsafeFileError(f"outside the sweep directory {base}, not read")
    return parent / given.name

# SPDX-License-Identifier: MIT
"""An image's sha256, computed once per version of the file and cached.

Every ``--image`` launch checks the image's sha256, which takes tens of seconds for a large
image. The cache keys it by the file's real path and ``os.stat`` identity: any write changes
the ctime, which no user can set, and a replaced file has a new inode. A file that changed
while it was hashed is not cached; a cache that cannot be read or written only costs the hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mushin_box._core.layout import DIGEST_CACHE_FILE
from mushin_box._core.sidecars import StrPath, read_json, write_json_atomic

#: a first hash of a file above this size shows a progress bar (on a terminal)
PROGRESS_ABOVE = 256 * 1024 * 1024
_CHUNK = 4 * 1024 * 1024
_KEEP = 64  # entries kept in the cache file, the newest
_HEX64 = re.compile(r"[0-9a-f]{64}")


def cache_file() -> Path:
    """``$XDG_CACHE_HOME/mushin-box/image-digests.json``, else under ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mushin-box" / DIGEST_CACHE_FILE


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _entries() -> dict[str, Any]:
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a corrupt cache is only a cache miss
        found = read_json(cache_file(), default={})
        if isinstance(found, dict):
            return found
    return {}


def image_sha256(path: StrPath, *, progress: bool | None = None) -> str:
    """Hex sha256 of the file at ``path``, from the cache when the file is unchanged.

    ``progress``: show a progress bar while hashing; ``None``: for a file above
    :data:`PROGRESS_ABOVE` when standard error is a terminal.

    >>> import tempfile
    >>> from unittest import mock
    >>> path = Path(tempfile.mkdtemp()) / "x.sif"
    >>> _ = path.write_bytes(b"abc")
    >>> with mock.patch.dict(os.environ, {"XDG_CACHE_HOME": str(path.parent)}):
    ...     image_sha256(path)[:16], image_sha256(path)[:16]  # hashed, then the cache's
    ('ba7816bf8f01cfea', 'ba7816bf8f01cfea')
    """
    real = os.path.realpath(path)
    before = _identity(os.stat(real))
    entry = _entries().get(real)
    entry = entry if isinstance(entry, dict) else {}
    if entry.get("identity") == before and _HEX64.fullmatch(str(entry.get("sha256"))):
        return str(entry["sha256"])
    if progress is None:
        progress = before[0] > PROGRESS_ABOVE and sys.stderr.isatty()
    digest = _hash(real, before[0], bool(progress))
    if _identity(os.stat(real)) == before:  # unchanged while it was read
        entries = _entries()
        entries.pop(real, None)
        entries[real] = {"identity": before, "sha256": digest}
        kept = dict(list(entries.items())[-_KEEP:])  # insertion order: the newest last
        with contextlib.suppress(OSError):  # a read-only home: the next launch hashes again
            write_json_atomic(cache_file(), kept)
    return digest


def _hash(path: str, size: int, progress: bool) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle, _bar(path, size, progress) as advance:
        while n := handle.readinto(buffer):
            digest.update(view[:n])
            advance(n)
    return digest.hexdigest()


@contextlib.contextmanager
def _bar(path: str, size: int, shown: bool) -> Iterator[Any]:
    if not shown:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(f"sha256 of {os.path.basename(path)} (once per version)", total=size)
        yield lambda n: bar.advance(task, n)

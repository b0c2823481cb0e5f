# SPDX-License-Identifier: MIT
"""A cell's provenance files: the record (canonical JSON, written atomically) and, beside
it, the package list whose sha256 it names, so that ``diff`` can name changed packages.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.layout import PACKAGES_FILE, PROVENANCE_FILE
from mushin_box._core.sidecars import canonical_dumps, write_bytes_atomic
from mushin_box._provenance.record import installed_packages, package_set, packages_text


@functools.cache
def _process_package_sha256() -> str:
    return str(package_set(installed_packages())["sha256"])


def _package_sha256(record: Mapping[str, Any]) -> str | None:
    repro = record.get("reproducibility")
    pset = repro.get("package_set") if isinstance(repro, Mapping) else None
    sha = pset.get("sha256") if isinstance(pset, Mapping) else None
    return sha if isinstance(sha, str) else None


def _write_packages(directory: Path, lines: Sequence[str]) -> None:
    path = directory / PACKAGES_FILE
    data = packages_text(lines).encode("utf-8")
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:  # a rewrite of the record: the list is there already
            return
    write_bytes_atomic(path, data)


def packages_beside(path: str | os.PathLike[str], record: Mapping[str, Any]) -> list[str] | None:
    """The package list beside a record (``path``: its cell or file), if the record names it.

    >>> import tempfile
    >>> from mushin_box._provenance.record import package_set
    >>> cell = Path(tempfile.mkdtemp())
    >>> rec = {"reproducibility": {"package_set": package_set(["attrs==26.1.0"])}}
    >>> _ = (cell / "mushin_packages.txt").write_text("attrs==26.1.0\\n")
    >>> packages_beside(cell, rec), packages_beside(cell, {"reproducibility": {}})
    (['attrs==26.1.0'], None)
    """
    sha = _package_sha256(record)
    p = Path(path)
    if sha is None:
        return None
    with contextlib.suppress(OSError):
        data = ((p.parent if p.is_file() else p) / PACKAGES_FILE).read_bytes()
        if hashlib.sha256(data).hexdigest() == sha:
            return data.decode("utf-8", "replace").splitlines()
    return None


def write_provenance(
    cell_dir: str | os.PathLike[str],
    record: Mapping[str, Any],
    *,
    packages: Sequence[str] | None = None,
) -> Path:
    """Write the cell's record, and first its package list (``packages``: ``ValueError``
    unless the record names them; else this process's, when the record names those);
    return its path. A config JSON cannot hold becomes a note, not a lost record."""
    path = Path(cell_dir) / PROVENANCE_FILE
    sha = _package_sha256(record)
    if packages is not None:
        if package_set(packages)["sha256"] != sha:
            raise ValueError(
                f"the {len(packages)} packages given are not the package set the record names"
            )
        lines: Sequence[str] | None = packages
    else:
        mine = sha is not None and sha == _process_package_sha256()
        lines = installed_packages() if mine else None
    if lines is not None:
        _write_packages(path.parent, lines)
    try:
        data = canonical_dumps(record)
    except (TypeError, ValueError) as exc:
        fixed = {**record, "reproducibility": dict(record.get("reproducibility") or {})}
        fixed["reproducibility"]["config"] = f"<not JSON-serializable: {exc}>"
        data = canonical_dumps(fixed)
    write_bytes_atomic(path, data)
    return path

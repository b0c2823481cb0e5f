# SPDX-License-Identifier: MIT
"""Every rank's output of a cell, found from the cell alone (``mushin-box logs``).

Where each rank writes, by launcher:

* SLURM (submitit): ``<job>_<task>_log.out``/``.err`` in the launcher's submitit folder,
  one pair per task (rank); the cell's status lists them under ``logs``.
* a local HydraDDP job: ranks 1..N-1 write to ``<cell>/logs/rank<r>.log``; rank 0 is the
  Hydra job itself, whose log is ``<cell>/<job name>.log``.

Readers only read: following a file is reading what was appended since the last look.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.layout import RANK_LOG_DIR, STATUS_FILE
from mushin_box._core.sidecars import read_json

__all__ = ["LogFollower", "rank_logs", "tail_lines"]

_RANK_FILE = re.compile(r"^rank(\d+)\.(?:out|err|log)$")


def rank_logs(cell_dir: Path, record: Mapping[str, Any] | None = None) -> dict[int, list[Path]]:
    """Rank -> its output files that exist, in a stable order (``.out`` before ``.err``)."""
    status: Mapping[str, Any] = record if record is not None else read_json(cell_dir / STATUS_FILE)
    status = status if isinstance(status, Mapping) else {}
    listed = status.get("logs")
    found: dict[int, list[Path]] = {}
    for name, path in sorted(listed.items() if isinstance(listed, dict) else ()):
        match = _RANK_FILE.match(str(name))
        if match and Path(path).is_file():
            found.setdefault(int(match.group(1)), []).append(Path(path))
    if 0 not in found:
        found[0] = sorted(p for p in cell_dir.glob("*.log") if p.is_file())
    for path in sorted((cell_dir / RANK_LOG_DIR).glob("rank*.log")):
        match = _RANK_FILE.match(path.name)
        if match and int(match.group(1)) not in found:
            found[int(match.group(1))] = [path]
    for files in found.values():  # stdout first: a rank's story reads top to bottom
        files.sort(key=lambda p: (p.suffix == ".err", p.name))
    return {rank: files for rank, files in sorted(found.items()) if files}


def tail_lines(path: Path, lines: int, max_bytes: int = 1 << 20) -> list[str]:
    """The last ``lines`` lines of a file (reading at most ``max_bytes`` from its end)."""
    if lines <= 0:
        return []
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - max_bytes))
        text = f.read().decode("utf-8", "replace")
    return text.splitlines()[-lines:]


class LogFollower:
    """What was appended to each file since the last :meth:`poll` (whole lines only)."""

    def __init__(self, files: Mapping[Path, str]) -> None:
        self._prefix = dict(files)
        self._offset = {path: 0 for path in files}
        self._partial = {path: b"" for path in files}

    def start_at_end(self) -> None:
        """Skip what the files hold now (``-f`` after a ``--tail``)."""
        for path in self._offset:
            try:
                self._offset[path] = path.stat().st_size
            except OSError:
                self._offset[path] = 0

    def poll(self) -> Iterator[str]:
        """New complete lines, each with its file's prefix."""
        for path, prefix in self._prefix.items():
            try:
                with open(path, "rb") as f:
                    f.seek(self._offset[path])
                    data = f.read()
            except OSError:
                continue
            self._offset[path] += len(data)
            data = self._partial[path] + data
            *complete, self._partial[path] = data.split(b"\n")
            for line in complete:
                yield prefix + line.decode("utf-8", "replace")

# SPDX-License-Identifier: MIT
"""Every rank's output of a cell, found from the cell alone (``mushin-box logs``): under
SLURM, submitit's ``<job>_<task>_log.out``/``.err`` per task, which the cell's status lists
under ``logs``; in a local HydraDDP job, ``<cell>/logs/rank<r>.log`` for ranks 1..N-1 and
the Hydra job's ``<cell>/<job name>.log`` for rank 0. :func:`cell_nodes` groups the ranks by
the node each recorded (``.mushin/ranks/rank<r>.json``). Nothing here writes.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mushin_box._core import layout
from mushin_box._core.safeio import UnsafeFileError, inside, open_regular_stat, read_tail
from mushin_box._core.sidecars import warn_sidecar
from mushin_box._provenance.ranks import read_rank_runtimes
from mushin_box._sweepdir.board import read_sweep
from mushin_box._sweepdir.manifest import read_status


def is_started(cell_dir: str | os.PathLike[str]) -> bool:
    """Whether ``cell_dir`` holds a status, readable or not: a cell that started."""
    return os.path.lexists(os.path.join(cell_dir, layout.STATUS_FILE))


def started_cells(root: Path) -> list[str]:
    """The sorted names of the started cells among the directories of ``root`` itself (a
    symlink may lead anywhere)."""
    try:
        with os.scandir(root) as entries:
            return sorted(
                e.name for e in entries if e.is_dir(follow_symlinks=False) and is_started(e)
            )
    except (FileNotFoundError, NotADirectoryError):
        return []


_RANK_FILE = re.compile(r"^rank(\d+)\.(?:out|err|log)$")


def _present(path: Path) -> bool:
    """Is there something at ``path`` that is not a directory? A symlink or FIFO counts:
    reading refuses it, and says so, rather than leaving a rank out silently."""
    return os.path.lexists(path) and not path.is_dir() or path.is_symlink()


#: submitit's own name of a task's output, ``<job>[_<array task>]_<task>_log.out``
_SUBMITIT_LOG = re.compile(r"^\d+(?:_\d+)?_\d+_log\.(?:out|err)$")


def _own_submitit_log(path: Path) -> bool:
    """A log a status names outside the sweep is read only when it is one of submitit's
    task logs by name, a regular file reached through no symbolic link, and the user's own:
    a ``submitit_folder`` elsewhere works, and ``/etc/shadow`` is still refused."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return (
        path.is_absolute()
        and path.resolve() == Path(os.path.normpath(path))  # no link, no `..`, on the way
        and ".." not in path.parts
        and _SUBMITIT_LOG.match(path.name) is not None
        and stat.S_ISREG(st.st_mode)
        and st.st_uid == os.getuid()
    )


def _listed(cell_dir: Path, status: Mapping[str, Any]) -> Iterator[tuple[int, Path]]:
    """The rank files a status names under the sweep directory (or submitit's own): a
    status may name any file, and it is read from any login node."""
    listed = status.get("logs")
    for name, path in sorted(listed.items() if isinstance(listed, dict) else ()):
        match = _RANK_FILE.match(str(name))
        if not match or not isinstance(path, str):
            continue
        try:
            safe = inside(cell_dir.parent, path)
        except UnsafeFileError as exc:
            if _own_submitit_log(Path(path)):  # a submitit_folder outside the sweep
                yield int(match.group(1)), Path(path)
                continue
            warn_sidecar(
                f"{cell_dir / layout.STATUS_FILE} names {path!r} as the log of rank "
                f"{match.group(1)}: {exc}"
            )
            continue
        if _present(safe):
            yield int(match.group(1)), safe


def rank_logs(cell_dir: Path, record: Mapping[str, Any] | None = None) -> dict[int, list[Path]]:
    """Rank -> its output files that exist (``.out`` before ``.err``): those the status
    names, then the local layout's."""
    status: Mapping[str, Any] | None = record if record is not None else read_status(cell_dir)
    found: dict[int, list[Path]] = {}
    for rank, path in _listed(cell_dir, status if isinstance(status, Mapping) else {}):
        found.setdefault(rank, []).append(path)
    if 0 not in found:
        found[0] = sorted(p for p in cell_dir.glob("*.log") if _present(p))
    local = cell_dir / layout.RANK_LOG_DIR
    if local.is_symlink():
        warn_sidecar(f"{local} is a symbolic link, not followed")
    else:
        for path in sorted(local.glob("rank*.log")):
            match = _RANK_FILE.match(path.name)
            if match and int(match.group(1)) not in found and _present(path):
                found[int(match.group(1))] = [path]
    for files in found.values():  # stdout first: a rank's story reads top to bottom
        files.sort(key=lambda p: (p.suffix == ".err", p.name))
    return {rank: files for rank, files in sorted(found.items()) if files}


#: the node of the ranks that recorded none (a record missing, unreadable, or refused)
UNRECORDED_NODE = "unrecorded"


@dataclass(frozen=True)
class NodeRanks:
    """The ranks of a cell that ran on one node, in rank order, and how each one's task
    ended (``completed``, an exception's type; None: no end recorded)."""

    name: str
    ranks: tuple[int, ...]
    ended: tuple[str | None, ...]


def _rank_rows(cell_dir: Path, attempt: Any) -> list[dict[str, Any]]:
    """The rank records of the cell's current attempt; none (warned) when ``.mushin`` or
    its ``ranks`` is a symbolic link."""
    private = cell_dir / layout.JOB_PRIVATE_DIR
    for directory in (private, private / layout.RANKS_DIR):
        if directory.is_symlink():
            warn_sidecar(f"{directory} is a symbolic link, not followed")
            return []
    return read_rank_runtimes(cell_dir, attempt=attempt if isinstance(attempt, int) else None)


def cell_nodes(
    cell_dir: Path, status: Mapping[str, Any] | None, ranks: Iterable[int] = ()
) -> list[NodeRanks]:
    """The cell's ranks grouped by the host each recorded, ordered by their first rank;
    ``ranks`` (those with output) that recorded none are under :data:`UNRECORDED_NODE`."""
    by_node: dict[str, dict[int, str | None]] = {}
    for row in _rank_rows(cell_dir, (status or {}).get("attempt")):
        host, ended = row.get("host"), row.get("ended")
        name = host if isinstance(host, str) and host.strip() else UNRECORDED_NODE
        by_node.setdefault(name, {})[row["rank"]] = ended if isinstance(ended, str) else None
    recorded = {rank for node in by_node.values() for rank in node}
    for rank in sorted(set(ranks) - recorded):
        by_node.setdefault(UNRECORDED_NODE, {})[rank] = None
    nodes = [
        NodeRanks(name, tuple(sorted(got)), tuple(got[r] for r in sorted(got)))
        for name, got in by_node.items()
    ]
    return sorted(nodes, key=lambda n: n.ranks[0])


@dataclass(frozen=True)
class OutputSize:
    """How many output files, their lines (counted up to a bound per file: ``whole``
    False when a file was bigger) and their bytes."""

    files: int = 0
    lines: int = 0
    size: int = 0
    whole: bool = True


def output_size(paths: Iterable[Path], max_bytes: int = layout.LOG_READ_BYTES) -> OutputSize:
    """The :class:`OutputSize` of output files, read as ``logs`` reads them (a symlink or
    FIFO is warned and not counted), the lines of each in its first ``max_bytes`` only."""
    files = lines = size = 0
    whole = True
    for path in paths:
        try:
            fd = open_regular_stat(path)[0]
        except FileNotFoundError:
            continue
        except OSError as exc:
            warn_sidecar(f"{path} is not read ({exc})")
            continue
        try:
            bytes_, done = os.fstat(fd).st_size, 0
            while done < max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes - done))):
                lines, done = lines + chunk.count(b"\n"), done + len(chunk)
        finally:
            os.close(fd)
        files, size, whole = files + 1, size + bytes_, whole and bytes_ <= max_bytes
    return OutputSize(files, lines, size, whole)


@dataclass(frozen=True)
class CellOutput:
    """A cell's recorded state (``no status`` without one), its ranks' output files and its
    nodes, from one read of its status."""

    state: str
    logs: dict[int, list[Path]]
    nodes: list[NodeRanks]


def cell_output(cell_dir: Path) -> CellOutput:
    """What :class:`CellOutput` holds, for the cell at ``cell_dir``."""
    status = read_status(cell_dir)
    logs = rank_logs(cell_dir, status or {})
    state = str((status or {}).get("status") or "no status")
    return CellOutput(state, logs, cell_nodes(cell_dir, status, logs))


def has_output(root: Path, name: str | None) -> bool:
    """Has the cell ``name`` (the one started cell when None) started and written a file?"""
    started = started_cells(root)
    if name is None:
        name = started[0] if len(started) == 1 else None
    return name is not None and name in started and bool(rank_logs(root / name))


def cell_may_write(root: Path, name: str | None) -> bool:
    """May the cell ``name`` (the sweep's one cell when None) still write output: it runs,
    or waits on a driver or job that may start it? An unknown name counts as a cell not
    started yet, while there is one (Hydra names a cell's directory when it starts)."""
    try:
        sweep = read_sweep(root)
    except FileNotFoundError:
        return False
    cells = sweep.cells
    cell = cells[0] if name is None and len(cells) == 1 else None
    if name is not None:
        cell = next((c for c in cells if c.dir == name), None)
        if cell is None:
            return sweep.active and any(c.state == "pending" and c.dir is None for c in cells)
    if cell is None:
        return False
    return cell.state == "running" or (cell.state == "pending" and sweep.active)


def tail_lines(path: Path, lines: int, max_bytes: int = 1 << 20) -> list[str]:
    """The last ``lines`` lines of a file (reading at most ``max_bytes`` from its end); an
    ``UnsafeFileError`` for a symlink, a FIFO, a device or a directory (not read)."""
    if lines <= 0:
        return []
    data, skipped = read_tail(path, max_bytes)
    text = data.decode("utf-8", "replace").splitlines()
    return (text[1:] if skipped and len(text) > lines else text)[-lines:]


class LogFollower:
    """What was appended to each file since the last :meth:`poll` (whole lines only).

    Each read is bounded: a file that grew by more than ``max_bytes`` is read from that far
    before its end (the skip warned); a symlink, FIFO or device is refused with a warning. A
    file truncated or replaced (rotated) is read again from its start, warned."""

    def __init__(self, files: Mapping[Path, str], max_bytes: int = layout.LOG_READ_BYTES) -> None:
        self._prefix = dict(files)
        self._offset = {path: 0 for path in files}
        self._partial = {path: b"" for path in files}
        self._identity: dict[Path, tuple[int, int]] = {}
        self._max = max_bytes

    def add(self, files: Mapping[Path, str]) -> None:
        """Follow these files too (from their start); those followed already keep going."""
        for path, prefix in files.items():
            if path not in self._prefix:
                self._prefix[path], self._offset[path], self._partial[path] = prefix, 0, b""

    def _restart_if_replaced(self, path: Path) -> None:
        try:
            st = path.lstat()
        except OSError:
            return
        identity, before = (st.st_dev, st.st_ino), self._identity.get(path)
        self._identity[path] = identity
        if self._offset[path] and (st.st_size < self._offset[path] or before != identity):
            how = "was truncated" if before == identity else "was replaced"
            warn_sidecar(f"{path} {how}; following it from its start")
            self._offset[path], self._partial[path] = 0, b""

    def tail(self, lines: int) -> Iterator[str]:
        """The last ``lines`` lines of each file, with its prefix (a refused file warned and
        left out); following then goes on from the files' ends."""
        for path, prefix in self._prefix.items():
            try:
                tail = tail_lines(path, lines)
            except FileNotFoundError:
                continue
            except OSError as exc:  # refused: a symlink, a FIFO (never read)
                warn_sidecar(f"{path} is not read ({exc})")
                continue
            for line in tail:
                yield prefix + line
        for path in self._offset:  # what the files hold now is shown
            try:
                st = path.lstat()
            except OSError:
                self._offset[path] = 0
                continue
            self._offset[path], self._identity[path] = st.st_size, (st.st_dev, st.st_ino)

    def poll(self) -> Iterator[str]:
        """New complete lines, each with its file's prefix."""
        for path, prefix in self._prefix.items():
            self._restart_if_replaced(path)
            try:
                data, offset = read_tail(path, self._max, start=self._offset[path])
            except FileNotFoundError:
                continue
            except OSError as exc:  # refused (UnsafeFileError), or unreadable
                warn_sidecar(f"{path} is not read ({exc})")
                continue
            end = offset + len(data)
            if offset > self._offset[path]:
                warn_sidecar(
                    f"{path}: its first {offset - self._offset[path]} bytes are skipped (only "
                    f"the last {self._max} are shown; read the file itself for the rest)"
                )
                self._partial[path] = b""
                data = data.split(b"\n", 1)[1] if b"\n" in data else b""
            self._offset[path] = end
            data = self._partial[path] + data
            *complete, self._partial[path] = data.split(b"\n")
            for line in complete:
                yield prefix + line.decode("utf-8", "replace")

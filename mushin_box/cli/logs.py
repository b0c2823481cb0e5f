# SPDX-License-Identifier: MIT
"""``mushin-box logs DIR [CELL] [--rank R] [--tail N] [-f]``: a cell's rank output.

Presentation only; which files hold which rank is :mod:`mushin_box._sweepdir.logs`. Lines of
several ranks are prefixed ``[rank N]``. ``-f`` follows the files while the cell runs, and
ends once it is no longer running (or on Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mushin_box.cli.main import UsageError
from mushin_box.cli.tables import resolve_sweep

__all__ = ["EXAMPLES", "HELP", "add_arguments", "run"]

HELP = "print (or follow with -f) the output of a cell's ranks, from its files"
EXAMPLES = (
    "mushin-box logs multirun/2026-01-31_12-00-00 module.lr=0.1 --tail 50",
    "mushin-box logs multirun/2026-01-31_12-00-00 module.lr=0.1 --rank 1 -f",
)
#: what its exit codes mean (shown in --help; 2 and 141: every command's)
EXITS = {0: "printed"}
_POLL_S = 0.5
_LIVENESS_EVERY_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="the sweep directory (or a cell directory)")
    parser.add_argument("cell", metavar="CELL", nargs="?", help="the cell directory name")
    parser.add_argument("--rank", type=int, default=None, metavar="R", help="only rank R")
    parser.add_argument(
        "--tail", type=int, default=None, metavar="N", help="only the last N lines of each file"
    )
    parser.add_argument(
        "-f", "--follow", action="store_true", help="keep printing while the cell runs"
    )


def _cell_dir(
    directory: str, cell: str | None, started_cells: Callable[[Path], list[str]]
) -> tuple[Path, Path]:
    """(sweep dir, cell dir) of a sweep directory and a cell's name, or a usage error that
    lists the cells to choose from."""
    root = resolve_sweep(directory)
    started = started_cells(root)
    if cell is None:
        if len(started) == 1:
            return root, root / started[0]
        raise UsageError(
            f"{root} has {len(started)} started cells; name one: "
            + (", ".join(started) if started else "(none yet)")
        )
    name = cell.rstrip("/").rsplit("/", 1)[-1]
    if name not in started:
        raise UsageError(
            f"no started cell {name} in {root}; its cells: {', '.join(started) or 'none yet'}"
        )
    return root, root / name


def _running(root: Path, cell_dir: Path) -> bool:
    # lazy: every command's start imports this module; only this command pays for its rooms
    from mushin_box._sweepdir.board import read_sweep

    for cell in read_sweep(root).cells:
        if cell.dir == cell_dir.name:
            return cell.state == "running"
    return False


def run(args: argparse.Namespace) -> int:
    # lazy: every command's start imports this module; only this command pays for its rooms
    from mushin_box._sweepdir.logs import (
        LogFollower,
        is_started,
        rank_logs,
        started_cells,
        tail_lines,
    )

    if args.tail is not None and args.tail < 0:
        raise UsageError(f"--tail {args.tail} is negative; give 0 or more lines")
    given = Path(args.dir)
    if args.cell is None and is_started(given):  # a cell given itself, not its sweep
        root, cell_dir = given.parent, given
    else:
        root, cell_dir = _cell_dir(args.dir, args.cell, started_cells)
    logs = rank_logs(cell_dir)
    if args.rank is not None:
        if args.rank not in logs:
            ranks = ", ".join(map(str, logs)) or "none"
            raise UsageError(
                f"no output of rank {args.rank} in {cell_dir}; ranks with output: {ranks}"
            )
        logs = {args.rank: logs[args.rank]}
    prefixed = len(logs) > 1
    files = {p: (f"[rank {r}] " if prefixed else "") for r, paths in logs.items() for p in paths}
    if not files and not args.follow:
        print(f"{cell_dir}: no rank output yet", file=sys.stderr)
        return 0
    follower = LogFollower(files)
    if args.tail is not None:
        for path, prefix in files.items():
            try:
                tail = tail_lines(path, args.tail)
            except OSError as exc:  # refused: a symlink, a FIFO (never read)
                print(f"mushin-box logs: warning: {path} is not read ({exc})", file=sys.stderr)
                continue
            for line in tail:
                print(prefix + line)
        follower.start_at_end()
    else:
        for line in follower.poll():
            print(line)
    if not args.follow:
        return 0
    sys.stdout.flush()
    checked = time.monotonic()
    try:
        while True:
            for line in follower.poll():
                print(line, flush=True)
            if time.monotonic() - checked > _LIVENESS_EVERY_S:
                checked = time.monotonic()
                if not _running(root, cell_dir):
                    for line in follower.poll():
                        print(line)
                    return 0
            time.sleep(_POLL_S)
    except KeyboardInterrupt:
        return 0

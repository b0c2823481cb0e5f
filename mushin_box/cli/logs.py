# SPDX-License-Identifier: MIT
"""``mushin-box logs DIR [CELL]``: a cell's rank output, prefixed ``[rank N]`` when
several ranks print (which files hold which rank: :mod:`mushin_box._sweepdir.logs`).

A cell on several nodes, or of more than :data:`INDEX_ABOVE_RANKS` ranks, prints an index
of its nodes first, then only rank 0's output and that of the first ranks that raised (64
copies of the same lines hide the one that failed). ``-f`` follows until the cell settles,
waiting for one the sweep may still start.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mushin_box._slurm.jobs import number_ranges
from mushin_box.cli.main import UsageError, suggest
from mushin_box.cli.output import shown
from mushin_box.cli.tables import resolve_sweep

if TYPE_CHECKING:
    from mushin_box._sweepdir.logs import CellOutput, NodeRanks, OutputSize

HELP = "print (or follow with -f) the output of a cell's ranks, from its files"
EXAMPLES = (
    "mushin-box logs multirun/2026-01-31_12-00-00 module.lr=0.1 --tail 50",
    "mushin-box logs multirun/2026-01-31_12-00-00 module.lr=0.1 --rank 1 -f",
    "mushin-box logs multirun/2026-01-31_12-00-00 module.lr=0.1 --node gpu-node-7",
)
EXITS = {0: "printed"}
#: a cell of more ranks than this (or on more than one node) is shown as an index of nodes
INDEX_ABOVE_RANKS = 8
#: after the index, the output of at most this many ranks that raised follows rank 0's
_FAILED_SHOWN = 3
_POLL_S = 0.5
_LIVENESS_EVERY_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="the sweep directory (or a cell directory)")
    parser.add_argument("cell", metavar="CELL", nargs="?", help="the cell directory name")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--rank", type=int, metavar="R", help="only rank R")
    which.add_argument("--node", metavar="NAME", help="only the ranks that ran on node NAME")
    which.add_argument(
        "--all", action="store_true", help="every rank's output (a cell on many nodes too)"
    )
    parser.add_argument("--tail", type=int, metavar="N", help="only the last N lines of each file")
    parser.add_argument(
        "-f", "--follow", action="store_true", help="keep printing while the cell runs"
    )


def _await_output(root: Path, name: str | None) -> None:
    """``-f`` on a cell that has written nothing yet: wait, saying so once, until it writes
    or may no longer write (its sweep ended, or nothing that may start it is left)."""
    from mushin_box._sweepdir.logs import cell_may_write, has_output

    said = False
    while not has_output(root, name) and cell_may_write(root, name):
        if not said:
            print(
                f"mushin-box logs: {shown(name or 'the cell')} of {shown(root)} has no output "
                "yet (queued or starting); waiting for it to start writing (Ctrl-C to stop)",
                file=sys.stderr,
                flush=True,
            )
            said = True
        time.sleep(_LIVENESS_EVERY_S)


def _named(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {','.join(number_ranges(ranks))}"


def _raised(nodes: Sequence[NodeRanks]) -> list[tuple[int, str]]:
    """(rank, exception type) of each rank whose task raised; a SIGTERM (``Terminated``)
    ends every rank alike and tells nothing of one."""
    return [
        (rank, how)
        for node in nodes
        for rank, how in zip(node.ranks, node.ended, strict=True)
        if how not in (None, "completed", "Terminated")
    ]


def _story(nodes: Sequence[NodeRanks], logs: Mapping[int, list[Path]]) -> dict[int, str]:
    """Rank 0 and the first ranks that raised, with what the index says of each, keyed by
    the rank whose files hold its output (torchrun on SLURM: its node's first rank's)."""
    story = {0: ""}
    for rank, how in _raised(nodes)[:_FAILED_SHOWN]:
        node = next(n for n in nodes if rank in n.ranks)
        holder = rank if rank in logs else next((r for r in node.ranks if r in logs), rank)
        said = how if holder == rank else f"holds rank {rank}'s: {how}"
        story[holder] = f"{story[holder]}; {said}" if story.get(holder) else said
    return story


def _select(args: argparse.Namespace, cell_dir: Path, cell: CellOutput) -> list[int] | None:
    """The ranks whose output is printed (None: every rank's)."""
    if args.rank is not None:
        if args.rank not in cell.logs:
            ranks = ", ".join(map(str, cell.logs)) or "none"
            raise UsageError(
                f"no output of rank {args.rank} in {cell_dir}; ranks with output: {ranks}"
            )
        return [args.rank]
    if args.node is not None:
        node = next((n for n in cell.nodes if n.name == args.node), None)
        if node is None:
            names = [n.name for n in cell.nodes]
            raise UsageError(
                f"no node {args.node} in {cell_dir}{suggest(args.node, names)}; give one of its "
                f"nodes: {', '.join(names) or 'none recorded (use --rank R)'}"
            )
        return list(node.ranks)
    ranks = {rank for node in cell.nodes for rank in node.ranks} | set(cell.logs)
    if args.all or (len(cell.nodes) <= 1 and len(ranks) <= INDEX_ABOVE_RANKS):
        return None  # a few ranks on one node: all of them
    return list(_story(cell.nodes, cell.logs))


def _files(
    logs: Mapping[int, list[Path]], ranks: Sequence[int] | None, prefixed: bool
) -> dict[Path, str]:
    """Each output file of ``ranks`` (all when None), with its lines' prefix."""
    chosen = [r for r in (logs if ranks is None else ranks) if r in logs]
    prefixed = prefixed or len(chosen) > 1
    return {path: (f"[rank {r}] " if prefixed else "") for r in chosen for path in logs[r]}


def _ended(node: NodeRanks, running: bool) -> str:
    """``completed``, or each way the node's ranks ended with its ranks, the unusual first
    (``rank 9 RuntimeError; ranks 8,10-11 completed``)."""
    unsaid = "running" if running else "no end recorded"
    ways: dict[str, list[int]] = {}
    for rank, how in zip(node.ranks, node.ended, strict=True):
        ways.setdefault(how or unsaid, []).append(rank)
    if len(ways) == 1:
        return next(iter(ways))
    order = sorted(ways.items(), key=lambda w: (w[0] in ("completed", unsaid), w[1][0]))
    return "; ".join(f"{_named(ranks)} {how}" for how, ranks in order)


def _index(cell_dir: Path, cell: CellOutput, sizes: Sequence[OutputSize]) -> list[str]:
    """A line per node (``sizes``: what its files hold), after one that counts them and
    before one that says what follows and how to see the rest."""
    from rich.filesize import decimal

    rows = []
    for node, held in zip(cell.nodes, sizes, strict=True):
        files = f"{held.files} file{'s' if held.files > 1 else ''}"
        lines = f"{held.lines}{'' if held.whole else '+'} line{'' if held.lines == 1 else 's'}"
        wrote = f"{files}, {lines}, {decimal(held.size)}" if held.files else "no output"
        how = _ended(node, cell.state == "running")
        rows.append((shown(node.name), _named(node.ranks), shown(how), wrote))
    widths = [*(max(len(row[i]) for row in rows) for i in range(3)), 0]  # the last: as is
    world = sum(len(n.ranks) for n in cell.nodes)
    out = [
        f"{shown(cell_dir.name)} ({shown(cell.state)}): {world} ranks on {len(cell.nodes)} nodes"
    ]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    story = _story(cell.nodes, cell.logs)
    told = " and ".join(
        f"rank {r}" + (f" ({shown(said)})" if said else "") for r, said in story.items()
    )
    more = [rank for rank, _ in _raised(cell.nodes)[_FAILED_SHOWN:]]
    out.append(
        f"below: the output of {told}"
        + (f" ({len(more)} more ranks raised: {','.join(number_ranges(more))})" if more else "")
        + "; a node's: --node NAME, a rank's: --rank R, every rank's: --all"
    )
    return [line.rstrip() for line in out]


def run(args: argparse.Namespace) -> int:
    from mushin_box._sweepdir.logs import (
        LogFollower,
        cell_may_write,
        cell_output,
        is_started,
        output_size,
        rank_logs,
        started_cells,
    )

    if args.tail is not None and args.tail < 0:
        raise UsageError(f"--tail {args.tail} is negative; give 0 or more lines")
    given = Path(args.dir)
    given_cell = args.cell is None and is_started(given)  # its sweep's other cells unread
    root = given.parent if given_cell else resolve_sweep(args.dir)
    name = args.cell.rstrip("/").rsplit("/", 1)[-1] if args.cell is not None else None
    if args.follow:
        _await_output(root, given.name if given_cell else name)
    cells = [] if given_cell else started_cells(root)
    if not given_cell and name is None and len(cells) != 1:
        raise UsageError(
            f"{root} has {len(cells)} started cells; name one: "
            + (", ".join(cells) if cells else "(none yet)")
        )
    if name is not None and name not in cells:
        raise UsageError(
            f"no started cell {name} in {root}; its cells: {', '.join(cells) or 'none yet'}"
        )
    cell_dir = given if given_cell else root / (name or cells[0])
    cell = cell_output(cell_dir)
    ranks = _select(args, cell_dir, cell)
    if not (args.rank is not None or args.node is not None or args.all) and ranks is not None:
        sizes = [output_size(p for r in n.ranks for p in cell.logs.get(r, [])) for n in cell.nodes]
        for line in _index(cell_dir, cell, sizes):
            print(line)
        print()
    prefixed = len(cell.logs if ranks is None else ranks) > 1
    files = _files(cell.logs, ranks, prefixed)
    if not files and not args.follow:
        print(f"{cell_dir}: no rank output yet", file=sys.stderr)
        return 0
    follower = LogFollower(files)
    for line in follower.poll() if args.tail is None else follower.tail(args.tail):
        print(line)
    if not args.follow:
        return 0
    # what the files gain, and the files that appear, until the cell may no longer write
    sys.stdout.flush()
    checked = time.monotonic()
    try:
        while True:
            for line in follower.poll():
                print(line, flush=True)
            if time.monotonic() - checked > _LIVENESS_EVERY_S:
                checked = time.monotonic()
                still = cell_may_write(root, cell_dir.name)
                follower.add(_files(rank_logs(cell_dir), ranks, prefixed))
                if not still:
                    for line in follower.poll():
                        print(line)
                    return 0
            time.sleep(_POLL_S)
    except KeyboardInterrupt:
        return 0

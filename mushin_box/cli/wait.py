# SPDX-License-Identifier: MIT
"""``mushin-box wait [DIR]``: follow a sweep from any shell until nothing of it runs.

It shows the progress a blocking launch shows, from the sidecars, then the same summary,
and exits as the launch would: 0 when every cell completed, 1 otherwise, 2 for bad input.
Polling is bounded (``--interval``, at least one second between looks at SLURM).
"""

from __future__ import annotations

import argparse
import sys
import time

from mushin_box.cli.main import UsageError

__all__ = ["HELP", "add_arguments", "run"]

HELP = "wait for a sweep to finish, showing its progress; exit as its launch would"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir", metavar="DIR", nargs="?", help="the sweep directory (default: the latest one)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between looks at the sidecars and SLURM (default 5, at least 1)",
    )
    parser.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="give up after S seconds (exit 3)"
    )
    parser.add_argument("--no-progress", action="store_true", help="print no progress bar")


def run(args: argparse.Namespace) -> int:
    from mushin_box._sweep.board import read_sweep
    from mushin_box._sweep.progress import SweepFollower
    from mushin_box.cli.status import EXIT_RUNNING, resolve_sweep, summary, table

    if args.interval < 1:
        raise UsageError(f"--interval {args.interval} is under 1 s; SLURM is asked each time")
    root = resolve_sweep(args.dir)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    follower = SweepFollower(root, show=not args.no_progress)
    with follower:
        sweep = follower.update()
        while sweep.going:
            if deadline is not None and time.monotonic() > deadline:
                print(f"{root}: still running after {args.timeout:g} s", file=sys.stderr)
                return EXIT_RUNNING
            time.sleep(args.interval)
            sweep = follower.update()
    sweep = read_sweep(root)
    from rich.console import Console

    print(f"{root}: {summary(sweep)}")
    Console(highlight=False).print(table(sweep))
    failed = [c for c in sweep.cells if c.state != "completed"]
    for cell in failed:
        if cell.error_type:
            print(
                f"{cell.dir}: {cell.state}: {cell.error_type}: {cell.error_message}"
                + (f" (see {cell.error_file})" if cell.error_file else "")
            )
    if failed:
        print(
            f"{len(failed)} cell(s) did not complete; run the sweep again with resume=True "
            "(CLI: the same launch with --resume) to run only those",
            file=sys.stderr,
        )
    return 1 if failed else 0

# SPDX-License-Identifier: MIT
"""``mushin-box wait [DIR]``: follow a sweep from any shell until nothing of it runs, with
a blocking launch's progress and summary, and exit as the launch would.

A cell whose SLURM job the scheduler does not answer for is ``unknown`` and is waited for
(it may still run). Once every cell has settled, it waits (at most :data:`DRAIN_S`, never
past ``--timeout``) for the sweep's jobs to leave the queue: a job whose cell completed
still writes its last files, and a resume would find it live and refuse.
"""

from __future__ import annotations

import argparse
import sys
import time

from mushin_box._slurm.jobs import is_live, name_job_ids, owned_by, queued_jobs
from mushin_box.cli.main import EXIT_RUNNING, UsageError, number
from mushin_box.cli.status import unanswered_line
from mushin_box.cli.tables import SWEEP_EXITS, end_report, resolve_sweep, resume_hint

HELP = "wait for a sweep to finish, showing its progress; exit as its launch would"
EXAMPLES = (
    "mushin-box wait multirun/2026-01-31_12-00-00 --timeout 3600   # exit 3 if it is still "
    "running then",
)
EXITS = SWEEP_EXITS
#: the longest ``wait`` gives the jobs of settled cells to leave the queue, in seconds
DRAIN_S = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir", metavar="DIR", nargs="?", help="the sweep directory (default: the latest one)"
    )
    parser.add_argument(
        "--interval",
        type=number(minimum=0, inclusive=False, maximum=3600, unit="seconds"),
        default=5.0,
        metavar="S",
        help="seconds between looks at the sidecars and SLURM (default 5; 1 to 3600: SLURM "
        "is asked at each look)",
    )
    parser.add_argument(
        "--timeout",
        type=number(minimum=0, maximum=366 * 86400, unit="seconds"),
        metavar="S",
        help="give up after S seconds (exit 3)",
    )
    parser.add_argument("--no-progress", action="store_true", help="print no progress bar")


def _pause(interval: float, deadline: float | None) -> float:
    """The next look is an interval away, or at the deadline if that comes first."""
    return interval if deadline is None else min(interval, max(0.0, deadline - time.monotonic()))


def run(args: argparse.Namespace) -> int:
    from mushin_box._sweepdir.board import read_sweep
    from mushin_box._sweepdir.progress import SweepFollower

    if args.interval < 1:
        raise UsageError(
            f"--interval {args.interval:g} is under 1 s, and SLURM is asked at each look: "
            "give 1 or more seconds"
        )
    root = resolve_sweep(args.dir)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    # a bar only where someone watches: piped or logged, the summary alone
    follower = SweepFollower(root, show=not args.no_progress and sys.stdout.isatty())
    said = False
    with follower:
        sweep = follower.update()
        while sweep.going:
            if sweep.unanswered and not said:  # said once; the next looks ask again
                print(f"{root}: {unanswered_line(sweep)}", file=sys.stderr)
                said = True
            if deadline is not None and time.monotonic() >= deadline:
                print(f"{root}: still running after {args.timeout:g} s", file=sys.stderr)
                return EXIT_RUNNING
            time.sleep(_pause(args.interval, deadline))
            sweep = follower.update()
    # the jobs leave the queue (an id without the sweep's mark was given to another job); a
    # queue that does not answer is not waited for: the cells have settled
    end = min(time.monotonic() + DRAIN_S, float("inf") if deadline is None else deadline)
    left = list(sweep.job_ids)
    while left:
        queued = queued_jobs(left) or {}
        left = [
            j for j, (state, mark, _) in queued.items() if is_live(state) and owned_by(mark, root)
        ]
        if left and time.monotonic() >= end:
            print(
                f"{root}: SLURM job(s) {name_job_ids(left)} still in the queue after their "
                "cells ended (a resume refuses them while they are)",
                file=sys.stderr,
            )
            break
        if left:
            time.sleep(_pause(args.interval, end))
    return end_report(read_sweep(root), resume_hint(root))

# SPDX-License-Identifier: MIT
"""``mushin-box cancel DIR [CELL...]``: stop running cells (all of them by default).

Presentation only; the acting is :func:`mushin_box._sweepdir.cancel.cancel`.
"""

from __future__ import annotations

import argparse
import sys

from mushin_box._slurm.jobs import name_job_ids
from mushin_box.cli.main import UsageError, number
from mushin_box.cli.output import shown
from mushin_box.cli.tables import resolve_sweep, resume_hint

HELP = (
    "stop the running cells of a sweep (scancel for SLURM cells, SIGTERM then SIGKILL for "
    "local ones) and record them cancelled; completed cells are never touched"
)
EXAMPLES = (
    "mushin-box cancel multirun/2026-01-31_12-00-00 module.lr=0.1   # one cell",
    "mushin-box cancel multirun/2026-01-31_12-00-00   # every running cell",
)
EXITS = {
    0: "every cell asked for is stopped, or had nothing to stop",
    1: "a cell could not be reached",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="the sweep directory")
    parser.add_argument(
        "cells", metavar="CELL", nargs="*", help="cell directory names (default: every cell)"
    )
    parser.add_argument(
        "--grace",
        type=number(minimum=0, maximum=3600, unit="seconds"),
        default=10.0,
        metavar="S",
        help="seconds a local cell has after SIGTERM before SIGKILL (default 10)",
    )


def run(args: argparse.Namespace) -> int:
    from mushin_box._sweepdir.cancel import cancel

    root = resolve_sweep(args.dir)
    try:
        report = cancel(root, args.cells, grace_s=args.grace)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for line in report.refused:
        print(shown(f"warning: {line}"), file=sys.stderr)
    if report.scancelled:  # as it ran: an array's tasks as one expression
        print(f"scancel {' '.join(report.scancel_argv)}")
    for cell in report.cancelled:
        print(shown(f"{cell}: cancelled"))
    if args.cells:  # named: each is answered
        for cell, state in report.untouched:
            print(shown(f"{cell}: {state}, left as it is"))
    else:  # the whole sweep: a line per state, not one per cell of a finished sweep
        by_state: dict[str, list[str]] = {}
        for cell, state in report.untouched:
            by_state.setdefault(state, []).append(cell)
        for state, cells in by_state.items():
            named = name_job_ids(cells, most=3, sep=", ")  # the first 3, and how many more
            print(shown(f"{len(cells)} {state} cell(s) left as they are: {named}"))
    for cell, why in report.unreachable:
        print(shown(f"{cell}: not stopped: {why}"))
    if report.cancelled:
        print(f"run them again: {resume_hint(root)}")
    return 1 if report.unreachable else 0

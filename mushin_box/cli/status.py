# SPDX-License-Identifier: MIT
"""``mushin-box status [DIR]``: one table of a sweep's cells, from its sidecars.

Presentation only; the reading is :func:`mushin_box._sweepdir.board.read_sweep`, which shows a
``running`` cell whose process or SLURM job is gone as ``failed``, and one whose SLURM job
could not be asked about (the scheduler did not answer) as ``unknown``. Exit codes, for
scripts: 0 every cell completed, 1 a cell failed, timed out, was cancelled or skipped, 3
cells still run, wait, or may (``unknown``; a pending cell counts only while a driver or a
SLURM job of the sweep lives), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mushin_box.cli.output import JSON_HELP, print_json
from mushin_box.cli.tables import SWEEP_EXITS

__all__ = ["HELP", "add_arguments", "as_json", "run", "unanswered_line"]

HELP = "show the cells of a sweep: swept values, state, attempt, job, node, duration, metrics"
EXAMPLES = (
    "mushin-box status   # the latest sweep under here",
    "mushin-box status runs/lr --json",
)
#: what its exit codes mean (shown in --help)
EXITS = SWEEP_EXITS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        help="the sweep directory (default: the latest sweep under the current directory)",
    )
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def as_json(sweep: Any) -> dict[str, Any]:
    import attrs

    from mushin_box.cli.tables import exit_code

    return {
        "sweep": str(sweep.root),
        "params": list(sweep.params),
        "launcher": sweep.launcher,
        "run_id": sweep.run_id,
        "job_ids": list(sweep.job_ids),
        "active": sweep.active,
        "unanswered": list(sweep.unanswered),
        "counts": sweep.counts(),
        "cells": [attrs.asdict(c) for c in sweep.cells],
        "exit_code": exit_code(sweep),
    }


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from mushin_box._sweepdir.board import read_sweep
    from mushin_box.cli.tables import error_line, exit_code, resolve_sweep, summary, table

    sweep = read_sweep(resolve_sweep(args.dir))
    if args.json:
        print_json(as_json(sweep))
    else:
        from rich.text import Text

        print(f"{sweep.root}: {summary(sweep)}")
        cells = table(sweep)
        Console(highlight=False).print(cells, soft_wrap=isinstance(cells, Text))
        for cell in sweep.cells:
            if cell.state in ("failed", "timeout") and cell.error_file:
                print(f"{cell.dir}: {error_line(cell)} (see {cell.error_file})")
    if sweep.unanswered:
        print(unanswered_line(sweep), file=sys.stderr)
    return exit_code(sweep)


def unanswered_line(sweep: Any) -> str:
    """The one line said when SLURM did not answer about some of the sweep's jobs."""
    from mushin_box._slurm.jobs import name_job_ids
    from mushin_box._sweepdir.board import UNANSWERED

    named = name_job_ids(sweep.unanswered)
    return f"SLURM job(s) {named}: {UNANSWERED}; their cells are shown unknown"

# SPDX-License-Identifier: MIT
"""``mushin-box status [DIR]``: one table of a sweep's cells, from its sidecars.

Presentation only; the reading is :func:`mushin_box._sweepdir.board.read_sweep`, which shows a
``running`` cell whose process or SLURM job is gone as ``failed``, and one whose SLURM job
could not be asked about as ``unknown``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mushin_box.cli.output import JSON_HELP, print_json, shown
from mushin_box.cli.tables import (
    SWEEP_EXITS,
    error_line,
    exit_code,
    fit_width,
    left_out,
    lines,
    resolve_sweep,
    summary,
    table_columns,
    terminal_width,
)

__all__ = ["HELP", "add_arguments", "as_json", "print_table", "run", "unanswered_line"]

HELP = "show the cells of a sweep: swept values, state, attempt, job, node, duration, metrics"
EXAMPLES = (
    "mushin-box status   # the latest sweep under here",
    "mushin-box status multirun/2026-01-31_12-00-00 --json",
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
    from mushin_box._sweepdir.board import read_sweep
    from mushin_box._sweepdir.settled import read_settled

    path = resolve_sweep(args.dir)
    said: list[str] = []

    def heading(view: Any) -> None:  # a finished sweep: its counts (a Heading), first
        said.append(f"{view.root}: {summary(view)}")
        print(said[0], flush=True)

    sweep = read_settled(path, heading=None if args.json else heading) or read_sweep(path)
    if args.json:
        print_json(as_json(sweep))
    else:
        print_table(sweep, said=said[0] if said else None)
    if sweep.unanswered:
        print(unanswered_line(sweep), file=sys.stderr)
    return exit_code(sweep)


def print_table(sweep: Any, said: str | None = None) -> None:
    """The summary line (unless ``said`` printed it already), the cells fitted to the
    terminal (:mod:`mushin_box.cli.tables`), which columns were left out, and a line per
    cell with an error: the error cut to one line, and its file."""
    from rich.console import Console

    console = Console(highlight=False)
    width = terminal_width(console)
    line = f"{sweep.root}: {summary(sweep)}"
    if line != said:
        print(line)
    columns = table_columns(sweep, error_line)
    dropped = fit_width(columns, width)
    # plain text with ANSI styles, not rich: rich measures and styles every line, most of
    # the command's time at 10,000 cells
    colour = console.is_terminal and console.color_system is not None and not console.no_color
    console.file.writelines(lines(columns, len(sweep.params), colour=colour))
    console.file.flush()
    if dropped and width:
        console.print(left_out(dropped, width), style="dim", soft_wrap=True)
    for cell in sweep.cells:
        if not (cell.error_type or cell.error_message):
            continue
        name = cell.dir or cell.combo
        where = f" (see {cell.error_file})" if cell.error_file else ""
        if width is None:  # piped, no COLUMNS: one line each, nothing cut but the error
            print(shown(f"{name}: {error_line(cell)}{where}"))
            continue
        # the error on the cell's line, cut to the width; its file on the next (a path
        # is never cut: it is there to be copied)
        print(shown(f"{name}: {error_line(cell, max(width - len(str(name)) - 2, 24))}"))
        if where:
            print(shown(f" {where}"))


def unanswered_line(sweep: Any) -> str:
    """The one line said when SLURM did not answer about some of the sweep's jobs."""
    from mushin_box._slurm.jobs import name_job_ids
    from mushin_box._sweepdir.board import UNANSWERED

    named = name_job_ids(sweep.unanswered)
    return f"SLURM job(s) {named}: {UNANSWERED}; their cells are shown unknown"

# SPDX-License-Identifier: MIT
"""``mushin-box status [DIR]``: one table of a sweep's cells, from its sidecars.

The table never cuts a word nor wraps. Wider than the terminal, it gives way in a fixed
order: swept headers lose their dotted prefixes, errors show their type alone, then whole
columns are left out, least needed first, and a line names them. The swept values and the
state always stay. Piped output is laid out for ``COLUMNS`` when set, else at full width.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from mushin_box.cli.output import JSON_HELP, print_json, shown
from mushin_box.cli.tables import (
    SWEEP_EXITS,
    Heading,
    detail,
    duration,
    error_line,
    exit_code,
    print_lines,
    resolve_sweep,
    summary,
)

HELP = "show the cells of a sweep: swept values, state, attempt, job, node, duration, metrics"
EXAMPLES = (
    "mushin-box status   # the latest sweep under here",
    "mushin-box status multirun/2026-01-31_12-00-00 --json",
)
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
    said = Heading()
    sweep = read_settled(path, heading=None if args.json else said) or read_sweep(path)
    if args.json:
        print_json(as_json(sweep))
    else:
        print_table(sweep, said)
    if sweep.unanswered:
        print(unanswered_line(sweep), file=sys.stderr)
    return exit_code(sweep)


def print_table(sweep: Any, said: Sequence[str] = ()) -> None:
    """The summary line (unless ``said`` printed it already), the cells fitted to the
    terminal, which columns were left out, and a line per cell with an error."""
    from rich.console import Console

    console = Console(highlight=False)
    width = int(console.width) if console.is_terminal else None
    if width is None:  # piped: laid out for COLUMNS when set, else no limit
        with contextlib.suppress(ValueError):
            width = int(os.environ.get("COLUMNS", ""))
        width = width if width and width > 0 else None
    line = f"{sweep.root}: {summary(sweep)}"
    if line not in said:
        print(line)
    columns = _columns(sweep)
    dropped = _fit(columns, width)
    rows = [[c.header for c in columns], *zip(*(c.values for c in columns), strict=True)]
    print_lines(console, rows, len(sweep.params))
    if dropped and width:
        console.print(_left_out(dropped, width), style="dim", soft_wrap=True)
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


_GAP = 2


@attrs.define
class _Column:
    """One column: its header (and a shorter one), its values, and when it gives way
    (``drop``: left out in this order, lowest first; None: never)."""

    header: str = attrs.field(converter=shown)  # read from a sweep directory: escaped
    values: list[str] = attrs.field(converter=lambda values: [shown(v) for v in values])
    drop: float | None = None
    short: str | None = None
    #: shorter values (an error's type alone), taken before anything is left out
    narrow: list[str] | None = attrs.field(
        default=None, converter=lambda values: values and [shown(v) for v in values]
    )

    @property
    def width(self) -> int:
        return max(len(self.header), *(len(v) for v in self.values)) if self.values else 0


def _columns(sweep: Any) -> list[_Column]:
    """The columns of ``sweep`` in their order, the empty ones left out."""
    from mushin_box._results.table import cell_text

    cells = sweep.cells
    last = [p.rsplit(".", 1)[-1] for p in sweep.params]  # a short name where it names one
    short = {p: s for p, s in zip(sweep.params, last, strict=True) if last.count(s) == 1 and s != p}
    columns = [
        _Column(p, [cell_text(c.combo.get(p, "-")) for c in cells], short=short.get(p))
        for p in sweep.params
    ]
    columns.append(_Column("state", [c.state for c in cells]))
    columns.append(_Column("detail", [detail(c) for c in cells], drop=9))
    columns.append(_Column("attempt", [str(c.attempt or "-") for c in cells], drop=0))
    waiting = any(c.state == "pending" and c.job_id for c in cells)  # its id: to scontrol
    columns.append(_Column("job", [c.job_id or "-" for c in cells], drop=8.7 if waiting else 3))
    columns.append(_Column("node", [c.host or "-" for c in cells], drop=1))
    columns.append(_Column("duration", [duration(c.duration_s) for c in cells], drop=2))
    names = sorted({name for c in cells for name in c.metrics})
    for i, name in enumerate(names):
        values = [cell_text(c.metrics[name]) if name in c.metrics else "-" for c in cells]
        columns.append(_Column(name, values, drop=8 - i / (len(names) + 1)))
    types = [(c.error_type or "Error").rsplit(".", 1)[-1] if error_line(c) else "" for c in cells]
    columns.append(_Column("error", [error_line(c) for c in cells], drop=4, narrow=types))
    kept = columns[: len(sweep.params) + 1]
    kept += [c for c in columns[len(kept) :] if any(v not in ("", "-") for v in c.values)]
    return kept


def _fit(columns: list[_Column], width: int | None) -> list[str]:
    """Fit ``columns`` in place into ``width`` by the module's rule; the headers left out."""

    def total() -> int:
        return sum(c.width for c in columns) + _GAP * (len(columns) - 1)

    if width is None or total() <= width:
        return []
    for column in columns:
        if column.short:
            column.header, column.short = column.short, None
    for column in columns:
        if column.narrow is not None and total() > width:
            column.values, column.narrow = column.narrow, None
    order = list(columns)
    dropped: list[_Column] = []
    for column in sorted((c for c in columns if c.drop is not None), key=lambda c: c.drop or 0):
        if total() <= width:
            break
        columns.remove(column)
        dropped.append(column)
    for column in reversed(dropped[:-1]):  # one left out late may have made room for it
        if total() + _GAP + column.width <= width:
            dropped.remove(column)
            columns[:] = [c for c in order if c in columns or c is column]
    return [c.header for c in dropped]


def _left_out(dropped: Sequence[str], width: int) -> str:
    """The line that names the columns left out, within ``width`` (``+N more``)."""
    for named in range(len(dropped), 0, -1):
        more = f" +{len(dropped) - named} more" if named < len(dropped) else ""
        line = f"(left out to fit: {', '.join(dropped[:named])}{more}; --json has all)"
        if len(line) <= width:
            return line
    return f"({len(dropped)} columns left out to fit; --json has all)"

# SPDX-License-Identifier: MIT
"""``mushin-box show DIR [DIR ...]``: a sweep's results, one row per cell, the best one
marked; several sweeps (or ``--all`` under a directory) as one table with a sweep column.

Presentation only: the rows are chosen by :func:`mushin_box._results.table.results_table`
(or ``sweeps_table``); ``--csv``, ``--md`` and ``--json`` print the same rows.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from mushin_box._core.layout import MANIFEST_FILE, STATUS_FILE
from mushin_box.cli.main import UsageError
from mushin_box.cli.output import JSON_HELP, print_json, shown
from mushin_box.cli.tables import ANSI, Heading, print_lines, resolve_sweep, restart_text, summary

HELP = (
    "the results of sweeps: swept values, state and metrics per cell, the best one marked; "
    "several sweeps in one table"
)
EXAMPLES = (
    "mushin-box show multirun/2026-01-31_12-00-00 --best val_loss",
    "mushin-box show multirun/2026-01-31_12-00-00 --where state=failed --md",
    "mushin-box show multirun/2026-01-31_12-00-00 multirun/2026-02-07_09-30-00 --sort val_loss@min",
    "mushin-box show multirun --all --best acc@max",
)
EXITS = {0: "shown"}
BEST_MARK = "★"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="*",
        help="the sweep directory; several: one table across them (default: the latest "
        "sweep under the current directory)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="every sweep under DIR (default: the current directory), in one table",
    )
    parser.add_argument(
        "--sort",
        metavar="METRIC",
        help="order by a metric, lowest first (METRIC:desc: highest first), a swept "
        "parameter, state or sweep; a metric no cell returned is read from the "
        "MetricsCallback series: its last epoch, or METRIC@min / METRIC@max over epochs",
    )
    parser.add_argument(
        "--best",
        metavar="METRIC",
        help=f"mark ({BEST_MARK}) the cell with the lowest METRIC (METRIC:max: the highest; "
        "METRIC@min / METRIC@max: over the epochs of its series)",
    )
    parser.add_argument(
        "--where",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="only cells with this swept value (or state=failed, sweep=NAME); several "
        "values: lr=0.1,1.0; repeat for more conditions",
    )
    parser.add_argument(
        "--params",
        choices=("changed", "all"),
        default="changed",
        help="the config keys shown besides the swept ones: those whose values differ "
        "between the sweeps (default), or every key of the config",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print CSV")
    out.add_argument("--md", action="store_true", help="print a Markdown table")
    out.add_argument("--json", action="store_true", help=JSON_HELP)


def _grid(table: Any) -> tuple[list[str], list[list[str]]]:
    """The headers and rows of the table, escaped (read from a sweep directory); a cell's
    directory repeats its swept values: it is a column only for a run without any."""
    from mushin_box._results.table import cell_text, format_param, table_records

    errors = any(c.error_type or c.error_message for c in table.cells)
    restarted = any(c.restarts for c in table.cells)
    label = [] if table.params else ["cell"]
    sweep = ["sweep"] if table.names else []
    state = ["state", *(["restarts"] if restarted else [])]
    headers = ["", *sweep, *label, *table.params, *state, *table.metrics]
    headers += ["error"] if errors else []
    rows = [
        [
            BEST_MARK if record["best"] else "",
            *([record["sweep"]] if table.names else []),
            *([] if table.params else [record["label"]]),
            *("-" if record[p] is None else format_param(record[p]) for p in table.params),
            record["state"],
            *([restart_text(cell) or "-"] if restarted else []),
            *(cell_text(record[m]) for m in table.metrics),
            *([record["error"] or ""] if errors else []),
        ]
        for cell, record in zip(table.cells, table_records(table), strict=True)
    ]
    return [shown(h) for h in headers], [[shown(v) for v in row] for row in rows]


def _best_line(table: Any) -> str | None:
    if table.best_metric is None:
        return None
    goal = "highest" if table.best_max else "lowest"
    if table.best is None:
        return f"best {table.best_metric} ({goal}): {table.best_text}"
    from mushin_box._results.table import cell_label, cell_text

    where = cell_label(table.best)
    if table.names:
        at = next(i for i, c in enumerate(table.cells) if c is table.best)
        where = f"{table.sweep_name(at)}/{where}"
    value = cell_text(table.best.metrics[table.best_metric])
    return f"{BEST_MARK} best {table.best_metric} ({goal}): {where} = {value}{table.best_text}"


_STYLES = {"completed": "green", "failed": "red", "timeout": "red", "running": "cyan"}
#: more rows than this are printed as aligned text (rich measures every cell: slow)
_LONG = 100


def _print_rich(table: Any, said: list[str], code: str | None) -> None:
    """The table, after its heading (unless ``said`` printed it already)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    headers, rows = _grid(table)
    console = Console(highlight=False)
    # the sweep and its counts, one line per sweep across sweeps
    heading = [f"{table.sweep.root}: {summary(table.sweep)}"]
    if table.names:
        width = max(len(n) for n in table.names)
        heading = [
            f"{name:<{width}}  {sweep.root}: {summary(sweep)}"
            for name, sweep in zip(table.names, table.sweeps, strict=True)
        ]
    for line in heading:
        if line not in said:
            console.print(escape(shown(line)), soft_wrap=True)
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    if len(rows) > _LONG or sum(widths) + 3 * len(widths) + 1 > console.width:
        # a line per cell, columns aligned, never folded mid-word (rich's lines are slow)
        print_lines(
            console,
            [headers, *rows],
            headers.index("state"),
            right=[h in table.metrics for h in headers],
            bold=[table.is_best(c) for c in table.cells],
            palette={state: ANSI[state] for state in _STYLES},
        )
    else:
        out = Table()
        for header in headers:
            right = "right" if header in table.metrics else "left"
            fold = "fold" if header in ("error", "sweep") else "ellipsis"
            out.add_column(escape(header), overflow=fold, justify=right)
        state_at = headers.index("state")
        for cell, row in zip(table.cells, rows, strict=True):
            style = _STYLES.get(row[state_at], "")
            row = [escape(v) for v in row]
            if style:
                row[state_at] = f"[{style}]{row[state_at]}[/]"
            out.add_row(*row, style="bold" if table.is_best(cell) else None)
        console.print(out)
    for line in (code, _best_line(table)):
        if line:
            console.print(escape(shown(line)), soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    from mushin_box._results.markup import md_table
    from mushin_box._results.report import code_line, table_csv
    from mushin_box._results.table import summary as results_summary
    from mushin_box._results.table import table_records

    said = Heading()
    # the heading goes first where nothing after it can fail: a --best, --sort or --where
    # the cells do not answer is one line on stderr, with nothing on stdout
    early = not (args.json or args.csv or args.md or args.where or args.sort or args.best)
    table = _table(args, said if early else None)
    code = None if table.names else code_line(table.sweep)
    if args.json:
        data = {**results_summary(table), **({} if table.names else {"code": code})}
        records = table_records(table)
        for record, config in zip(records, table.row_configs(), strict=True):
            record["config"] = config  # the whole config the row ran
        print_json({**data, "cells": records})
    elif args.csv:
        records = table_records(table)
        sweep = ["sweep"] if table.names else []
        fields = [*sweep, "dir", *table.params, "state", *table.metrics, "error", "best"]
        sys.stdout.write(table_csv(records, fields))
    elif args.md:
        print(md_table(*_grid(table)))
        for line in (code, _best_line(table)):
            if line:
                print(f"\n{line}")
    else:
        _print_rich(table, said, code)
    return 0


def _table(args: argparse.Namespace, heading: Any = None) -> Any:
    """The rows of one sweep, or across the sweeps named (``--all``: found under DIR);
    ``heading`` is called with one finished sweep's view before its cells are read."""
    from mushin_box._results.table import read_results, results_table, sweeps_table
    from mushin_box._sweepdir.board import find_sweeps
    from mushin_box._sweepdir.manifest import is_sweep_dir

    options = dict(where=args.where, sort=args.sort, best=args.best, config_keys=args.params)
    for directory in [] if args.all else args.dir:  # no sweep, but holds some: --all shows them
        path = Path(directory)
        if not path.is_dir() or is_sweep_dir(path) or (path / STATUS_FILE).is_file():
            continue
        if found := find_sweeps(path):
            raise UsageError(
                f"{directory} is not a sweep directory, but holds {len(found)} sweep(s); show "
                f"them in one table: mushin-box show {shlex.quote(directory)} --all"
            )
    if not args.all and len(args.dir) <= 1:
        sweep = read_results(resolve_sweep(args.dir[0] if args.dir else None), heading)
        return results_table(sweep, **options)
    roots: list[Path] = [] if args.all else [resolve_sweep(d) for d in args.dir]
    for parent in (args.dir or ["."]) if args.all else []:
        if not Path(parent).is_dir():
            raise UsageError(f"{parent} is not a directory; give a directory that holds sweeps")
        sweeps = sorted(find_sweeps(parent))
        if not sweeps:
            raise UsageError(
                f"no sweep under {parent} (no {MANIFEST_FILE} found 4 levels down); give the "
                "directory the sweeps were written under"
            )
        roots += sweeps
    roots = list(dict.fromkeys(Path(os.path.realpath(r)) for r in roots))
    return sweeps_table([read_results(r) for r in roots], sweep_names(roots), **options)


def sweep_names(roots: list[Path]) -> list[str]:
    """Each sweep's name across sweeps: its path below the directory they all share (its
    own name when that is all they share, or it is that directory).

    >>> sweep_names([Path("/r/lr/a"), Path("/r/lr/b"), Path("/r/wd/a")])
    ['lr/a', 'lr/b', 'wd/a']
    >>> sweep_names([Path("/r/a"), Path("/r")])
    ['a', 'r']
    """
    common = Path(os.path.commonpath(roots)) if roots else Path()
    names = [str(r.relative_to(common)) if r != common else r.name for r in roots]
    return [n if n not in ("", ".") else str(r) for n, r in zip(names, roots, strict=True)]

# SPDX-License-Identifier: MIT
"""``mushin-box show DIR``: a sweep's results, one row per cell, the best one marked.

Presentation only: the sweep is read by :func:`mushin_box._sweepdir.board.read_sweep` (the
sidecars; no torch), the rows chosen by :func:`mushin_box._results.table.results_table`.
``--csv``, ``--md`` and ``--json`` print the same rows for a spreadsheet, a pull request or
a script. Exit codes: 0, or 2 for bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from mushin_box.cli.main import UsageError
from mushin_box.cli.output import JSON_HELP, print_json

__all__ = ["EXAMPLES", "HELP", "add_arguments", "run"]

HELP = "the results of a sweep: swept values, state and metrics per cell, the best one marked"
EXAMPLES = (
    "mushin-box show runs/lr --best val_loss",
    "mushin-box show runs/lr --where state=failed --md",
)
#: what its exit codes mean (shown in --help; 2 and 141: every command's)
EXITS = {0: "shown"}
BEST_MARK = "★"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        help="the sweep directory (default: the latest sweep under the current directory)",
    )
    parser.add_argument(
        "--sort",
        metavar="METRIC",
        help="order by a metric, lowest first (METRIC:desc: highest first), a swept "
        "parameter, or state",
    )
    parser.add_argument(
        "--best",
        metavar="METRIC",
        help=f"mark ({BEST_MARK}) the cell with the lowest METRIC (METRIC:max: the highest)",
    )
    parser.add_argument(
        "--where",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="only cells with this swept value (or state=failed); several values: "
        "lr=0.1,1.0; repeat for more conditions",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print CSV")
    out.add_argument("--md", action="store_true", help="print a Markdown table")
    out.add_argument("--json", action="store_true", help=JSON_HELP)


def _csv(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return value  # numbers at full precision


def _headers(table: Any) -> list[str]:
    # the cell's directory repeats its swept values: named only for a run without any
    cell = [] if table.params else ["cell"]
    return ["", *cell, *table.params, "state", *table.metrics, "error"]


def _rows(table: Any) -> list[list[str]]:
    from mushin_box._results.table import cell_text, format_param, table_records

    rows = []
    for record in table_records(table):
        rows.append(
            [
                BEST_MARK if record["best"] else "",
                *([] if table.params else [record["label"]]),
                *(format_param(record[p]) for p in table.params),
                record["state"],
                *(cell_text(record[m]) for m in table.metrics),
                record["error"] or "",
            ]
        )
    return rows


def _best_line(table: Any) -> str | None:
    if table.best_metric is None:
        return None
    goal = "highest" if table.best_max else "lowest"
    if table.best is None:
        return f"best {table.best_metric} ({goal}): no cell has a value"
    from mushin_box._results.table import cell_label, cell_text

    value = cell_text(table.best.metrics[table.best_metric])
    return f"{BEST_MARK} best {table.best_metric} ({goal}): {cell_label(table.best)} = {value}"


def _print_rich(table: Any) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from mushin_box._results.report import code_line
    from mushin_box.cli.tables import summary

    out = Table()
    for header in _headers(table):
        right = "right" if header in table.metrics else "left"
        fold = "fold" if header == "error" else "ellipsis"
        out.add_column(escape(header), overflow=fold, justify=right)
    styles = {"completed": "green", "failed": "red", "timeout": "red", "running": "cyan"}
    for cell, row in zip(table.cells, _rows(table), strict=True):
        state_at = _headers(table).index("state")
        style = styles.get(row[state_at], "")
        row = [escape(v) for v in row]
        if style:
            row[state_at] = f"[{style}]{row[state_at]}[/]"
        out.add_row(*row, style="bold" if table.is_best(cell) else None)
    console = Console(highlight=False)
    console.print(
        f"{escape(str(table.sweep.root))}: {escape(summary(table.sweep))}", soft_wrap=True
    )
    console.print(out)
    for line in (code_line(table.sweep), _best_line(table)):
        if line:
            console.print(escape(line), soft_wrap=True)


def run(args: argparse.Namespace) -> int:
    from mushin_box._results.htmlpage import md_table
    from mushin_box._results.report import code_line
    from mushin_box._results.table import ResultsError, results_table, summary, table_records
    from mushin_box._sweepdir.board import read_sweep
    from mushin_box.cli.tables import resolve_sweep

    sweep = read_sweep(resolve_sweep(args.dir))
    try:
        table = results_table(sweep, where=args.where, sort=args.sort, best=args.best)
    except ResultsError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        data = {**summary(table), "code": code_line(sweep), "cells": table_records(table)}
        print_json(data)
    elif args.csv:
        records = table_records(table)
        fields = ["dir", *table.params, "state", *table.metrics, "error", "best"]
        writer = csv.DictWriter(sys.stdout, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow({k: _csv(v) for k, v in record.items()})
    elif args.md:
        print(md_table(_headers(table), _rows(table)))
        for line in (code_line(sweep), _best_line(table)):
            if line:
                print(f"\n{line}")
    else:
        _print_rich(table)
    return 0

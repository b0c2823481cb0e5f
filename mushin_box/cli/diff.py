# SPDX-License-Identifier: MIT
"""``mushin-box diff A B``: what differs between two cells or two sweeps.

Presentation only; the comparison and the rows every output shows are
:mod:`mushin_box._results.diff`. The first line is the verdict in words; ``reproduce``
means "the same" by the same rule.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from mushin_box.cli.main import add_switches, add_tolerance_arguments
from mushin_box.cli.output import JSON_HELP, print_json

HELP = (
    "compare the provenance and metrics of two cells or two sweeps; exit 0 when they are "
    "the same experiment with the same results, 1 when a field or a metric differs, 2 for "
    "bad input"
)
EXAMPLES = (
    "mushin-box diff multirun/2026-01-31_12-00-00/module.lr=0.1 "
    "multirun/2026-02-07_09-30-00/module.lr=0.1",
    "mushin-box diff multirun/2026-01-31_12-00-00 multirun/2026-02-07_09-30-00 --brief --md",
    "mushin-box diff multirun/2026-01-31_12-00-00/cell multirun/2026-02-07_09-30-00/cell "
    "--rtol 1e-6   # results equal to 6 digits",
)
EXITS = {
    0: "the same experiment with the same results",
    1: "a reproducibility field or a metric differs (--provenance-only: a field)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="a cell directory, a sweep directory or a record")
    parser.add_argument("b", metavar="B", help="the same kind of thing as A")
    add_tolerance_arguments(parser)
    add_switches(
        parser,
        {
            "--provenance-only": "the exit status compares the reproducibility fields only, not "
            "the metrics",
            "--brief": "what breaks reproducibility and the metrics, and one line that counts the "
            "fields expected to differ by kind (no scheduler ids, ports or pids); --json keeps "
            "every row",
        },
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help=JSON_HELP)
    out.add_argument("--md", action="store_true", help="print Markdown (for an issue or PR)")
    out.add_argument(
        "--html", action="store_true", help="print a self-contained HTML page (> diff.html)"
    )


#: narrower than this (or not a terminal), rows are lines: a table folds paths mid-word
_TABLE_WIDTH = 100


def _field_lines(title: str, rows: Sequence[Any], sweep: bool, notes: Sequence[str] = ()) -> str:
    lines = [f"  {f'{r.cell}: ' if sweep else ''}{r.path}: {r.a} -> {r.b}" for r in rows]
    return "\n".join([title, *(f"  {n}" for n in notes), *lines])


def _print_tables(diff: Any, brief: bool, results: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from mushin_box._results.diff import cell_notes, expected_counts, field_rows, metric_rows

    console = Console(highlight=False)
    tables = console.is_terminal and console.width >= _TABLE_WIDTH

    def show(title: str, rows: Sequence[Any], style: str, notes: Sequence[str] = ()) -> None:
        if not (rows or notes):
            console.print(f"[bold]{title}[/]: nothing")
            return
        title += f" ({len(rows) + len(notes)})"
        if not tables:  # a line per row, never folded: soft_wrap leaves long lines to the reader
            console.print(escape(_field_lines(title, rows, sweep, notes)), soft_wrap=True)
            return
        if notes:  # the cells only one side has, a line per side, above the table
            console.print(
                escape(_field_lines(title, (), sweep, notes)), style=style, soft_wrap=True
            )
        if rows:
            table = Table(
                title="" if notes else title, title_justify="left", title_style=style, expand=False
            )
            for name in [*(["cell"] if sweep else []), "path", "A", "B"]:
                table.add_column(name, overflow="fold")
            for r in rows:
                table.add_row(*map(escape, [*([r.cell] if sweep else []), r.path, r.a, r.b]))
            console.print(table)

    sweep = diff.kind == "sweep"
    style = "bold green" if diff.same(results=results) else "bold red"
    console.print(f"[{style}]{escape(diff.verdict(results=results))}[/]", soft_wrap=True)
    console.print(f"[bold]A[/] {escape(diff.a)}\n[bold]B[/] {escape(diff.b)}", soft_wrap=True)
    if sweep:
        console.print(f"{len(diff.cells)} cell(s) compared, matched by their swept values")
    metrics = metric_rows(diff)
    if not metrics:
        console.print("[bold]Metrics[/]: none recorded")
    elif tables:
        title = f"Metrics (atol={diff.atol:g}, rtol={diff.rtol:g})"
        table = Table(title=title, title_justify="left", title_style="bold")
        if sweep:
            table.add_column("cell", overflow="fold")
        table.add_column("metric")
        for name in ("A", "B", "Δ (B-A)"):
            table.add_column(name, justify="right")
        table.add_column("match")
        for m in metrics:
            names = [*([m.cell] if sweep else []), m.name, m.a, m.b]
            mark = "[green]yes[/]" if m.match else "[red]no[/]"
            table.add_row(*map(escape, names), m.delta, mark)
        console.print(table)
    else:
        lines = [f"Metrics (atol={diff.atol:g}, rtol={diff.rtol:g})"]
        for m in metrics:
            where = f"{m.cell}: " if sweep else ""
            delta = f" ({m.delta})" if m.delta else ""
            lines.append(
                f"  {where}{m.name}: {m.a} -> {m.b}{delta}  {'match' if m.match else 'DIFFER'}"
            )
        console.print(escape("\n".join(lines)), soft_wrap=True)
    show("Breaks reproducibility", field_rows(diff, "breaks"), "bold red", cell_notes(diff))
    extended = field_rows(diff, "extended")
    if extended:  # a fit extended to a raised limit: on purpose, not an accident
        show("Training limits, changed on purpose", extended, "bold cyan")
    if brief:  # the scheduler's bookkeeping, ports, pids, times: counted, never listed
        console.print(escape(expected_counts(diff)), soft_wrap=True)
        return
    show("Expected to differ", field_rows(diff, "expected"), "bold yellow")


def run(args: argparse.Namespace) -> int:
    from mushin_box._results.diff import diff_html, diff_markdown, diff_provenance

    diff = diff_provenance(args.a, args.b, atol=args.atol, rtol=args.rtol)
    results = not args.provenance_only
    if args.json:
        data = {**diff.to_dict(), "same": diff.same(results=results)}
        data["verdict"] = diff.verdict(results=results)
        print_json(data)
    elif args.md or args.html:
        page = diff_markdown if args.md else diff_html
        sys.stdout.write(page(diff, brief=args.brief, results=results))
    else:
        _print_tables(diff, args.brief, results)
    return 0 if diff.same(results=results) else 1

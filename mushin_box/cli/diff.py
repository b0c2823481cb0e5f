# SPDX-License-Identifier: MIT
"""``mushin-box diff A B``: what differs between two cells or two sweeps.

Presentation only; the comparison is :func:`mushin_box._results.diff.diff_provenance`, and
the rows every output shows (short hashes, cell labels, ``--brief``) come from
:mod:`mushin_box._results.diffview`. ``--md`` and ``--html`` print the same tables to send to
a colleague (``> diff.html``); ``--json`` keeps every row and whole hashes.
The first line is the verdict in words. Exit 0: same experiment, same results (metrics
equal within ``--atol``/``--rtol``); 1: a reproducibility field or a metric differs (with
``--provenance-only``, only a field); 2: bad input. ``reproduce`` means the same by them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from mushin_box.cli.main import UsageError, in_flags

__all__ = ["EXAMPLES", "HELP", "add_arguments", "run"]

HELP = (
    "compare the provenance and metrics of two cells or two sweeps; exit 0 when they are "
    "the same experiment with the same results, 1 when a field or a metric differs, 2 for "
    "bad input"
)
EXAMPLES = (
    "mushin-box diff runs/a/module.lr=0.1 runs/b/module.lr=0.1",
    "mushin-box diff runs/a runs/b --brief --md",
    "mushin-box diff runs/a/cell runs/b/cell --rtol 1e-6   # results equal to 6 digits",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="a cell directory, a sweep directory or a record")
    parser.add_argument("b", metavar="B", help="the same kind of thing as A")
    parser.add_argument(
        "--atol",
        type=float,
        default=0.0,
        metavar="X",
        help="absolute tolerance when comparing metrics (default 0: exact)",
    )
    parser.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        metavar="X",
        help="relative tolerance for metrics: |B-A| <= atol + rtol*|A| (default 0)",
    )
    parser.add_argument(
        "--provenance-only",
        action="store_true",
        help="the exit status compares the reproducibility fields only, not the metrics",
    )
    parser.add_argument(
        "--brief",
        action="store_true",
        help="hide the run rows that differ between any two runs (times, pid, host, the "
        "run's fingerprints); --json keeps them",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print machine-readable JSON")
    out.add_argument("--md", action="store_true", help="print Markdown (for an issue or PR)")
    out.add_argument(
        "--html", action="store_true", help="print a self-contained HTML page (> diff.html)"
    )


def _json_safe(value: Any) -> Any:
    """Floats JSON cannot hold (nan, inf) as strings, so ``--json`` output is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _fields_table(title: str, rows: Sequence[Any], sweep: bool, style: str) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left", title_style=style, expand=False)
    if sweep:
        table.add_column("cell", overflow="fold")
    table.add_column("path", overflow="fold")
    table.add_column("A", overflow="fold")
    table.add_column("B", overflow="fold")
    for r in rows:
        # paths like package_set[numpy] and values are text, not rich markup
        table.add_row(*map(escape, [*([r.cell] if sweep else []), r.path, r.a, r.b]))
    return table


def _metrics_table(rows: Sequence[Any], atol: float, rtol: float, sweep: bool) -> Any:
    from rich.markup import escape
    from rich.table import Table

    title = f"Metrics (atol={atol:g}, rtol={rtol:g})"
    table = Table(title=title, title_justify="left", title_style="bold")
    if sweep:
        table.add_column("cell", overflow="fold")
    table.add_column("metric")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("Δ (B-A)", justify="right")
    table.add_column("match")
    for m in rows:
        names = [*([m.cell] if sweep else []), m.name, m.a, m.b]
        mark = "[green]yes[/]" if m.match else "[red]no[/]"
        table.add_row(*map(escape, names), m.delta, mark)
    return table


def _print_tables(diff: Any, brief: bool, results: bool) -> None:
    from rich.console import Console
    from rich.markup import escape

    from mushin_box._results.diffview import field_rows, metric_rows

    console = Console(highlight=False)
    sweep = diff.kind == "sweep"
    style = "bold green" if diff.same(results=results) else "bold red"
    console.print(f"[{style}]{escape(diff.verdict(results=results))}[/]")
    console.print(f"[bold]A[/] {escape(diff.a)}\n[bold]B[/] {escape(diff.b)}")
    if sweep:
        console.print(f"{len(diff.cells)} cell(s) compared, matched by their swept values")
    breaks, _ = field_rows(diff, "breaks")
    if breaks:
        title = f"Breaks reproducibility ({len(breaks)})"
        console.print(_fields_table(title, breaks, sweep, "bold red"))
    else:
        console.print("[bold]Breaks reproducibility[/]: nothing")
    expected, hidden = field_rows(diff, "expected", brief=brief)
    if expected:
        title = f"Expected to differ ({len(expected)})"
        console.print(_fields_table(title, expected, sweep, "bold yellow"))
    else:
        console.print("[bold]Expected to differ[/]: nothing")
    if hidden:
        console.print(f"({hidden} row(s) that differ between any two runs hidden: --brief)")
    metrics = metric_rows(diff)
    if metrics:
        console.print(_metrics_table(metrics, diff.atol, diff.rtol, sweep))
    else:
        console.print("[bold]Metrics[/]: none recorded")
    if diff.reproducible:
        console.print("[bold green]reproducibility parts match[/]")
    else:
        console.print("[bold red]reproducibility parts differ[/]")


def run(args: argparse.Namespace) -> int:
    from mushin_box._results.diff import DiffInputError, diff_provenance

    try:
        diff = diff_provenance(args.a, args.b, atol=args.atol, rtol=args.rtol)
    except DiffInputError as exc:
        raise UsageError(in_flags(str(exc), ["atol", "rtol"])) from None
    results = not args.provenance_only
    if args.json:
        data = {**diff.to_dict(), "same": diff.same(results=results)}
        data["verdict"] = diff.verdict(results=results)
        json.dump(_json_safe(data), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    elif args.md:
        from mushin_box._results.diffview import diff_markdown

        sys.stdout.write(diff_markdown(diff, brief=args.brief, results=results))
    elif args.html:
        from mushin_box._results.diffview import diff_html

        sys.stdout.write(diff_html(diff, brief=args.brief, results=results))
    else:
        _print_tables(diff, args.brief, results)
    return 0 if diff.same(results=results) else 1

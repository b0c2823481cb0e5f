# SPDX-License-Identifier: MIT
"""``mushin-box diff A B``: what differs between two cells or two sweeps.

Presentation only; the comparison is :func:`mushin_box._sweep.diff.diff_provenance`.
Exit 0 when the reproducibility parts match, 1 when they differ, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from mushin_box.cli.main import UsageError

__all__ = ["HELP", "add_arguments", "run"]

HELP = (
    "compare the provenance and metrics of two cells or two sweeps; exit 0 when their "
    "reproducibility parts match, 1 when they differ"
)
_MAX_VALUE = 60  # characters of a value shown in a table cell
_GROUP_OVER = 3  # more rows than this with the same [*] path are shown as one row


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
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _short(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _side(f: Any, side: str) -> str:
    absent = (side == "a" and f.change == "only_b") or (side == "b" and f.change == "only_a")
    return "(absent)" if absent else _short(getattr(f, side))


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    return _short(value)


def _json_safe(value: Any) -> Any:
    """Floats JSON cannot hold (nan, inf) as strings, so ``--json`` output is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _grouped(rows: Sequence[Any]) -> list[tuple[str, str, str, int]]:
    """(path, a, b, count): paths that differ only in a list index are merged."""
    from mushin_box._provenance.compare import collapse_key

    groups: dict[str, list[Any]] = {}
    for f in rows:
        groups.setdefault(collapse_key(f.path), []).append(f)
    out: list[tuple[str, str, str, int]] = []
    for key, items in groups.items():
        if len(items) > _GROUP_OVER:
            out.append((key, "…", "…", len(items)))
        else:
            out.extend((f.path, _side(f, "a"), _side(f, "b"), 1) for f in items)
    return out


def _fields_table(title: str, cells: Iterable[Any], attr: str, sweep: bool, style: str) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left", title_style=style, expand=False)
    if sweep:
        table.add_column("cell", overflow="fold")
    table.add_column("path", overflow="fold")
    table.add_column("A", overflow="fold")
    table.add_column("B", overflow="fold")
    for cell in cells:
        for path, a, b, count in _grouped(getattr(cell, attr)):
            label = f"{path} ({count} rows)" if count > 1 else path
            # paths like package_set[numpy] and values are text, not rich markup
            row = [*([cell.name] if sweep else []), label, a, b]
            table.add_row(*map(escape, row))
    return table


def _metrics_table(cells: Iterable[Any], atol: float, sweep: bool) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Metrics (atol={atol:g})", title_justify="left", title_style="bold")
    if sweep:
        table.add_column("cell", overflow="fold")
    table.add_column("metric")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("Δ (B-A)", justify="right")
    table.add_column("match")
    for cell in cells:
        for m in cell.metrics:
            a = _number(m.a) if m.in_a else "(absent)"
            b = _number(m.b) if m.in_b else "(absent)"
            if m.delta is None:
                delta = ""
            elif isinstance(m.a, list):
                delta = f"max {m.delta:.3g}"
            else:
                delta = f"{m.delta:+.3g}"
            mark = "[green]yes[/]" if m.match else "[red]no[/]"
            names = [*([cell.name] if sweep else []), m.name, a, b]
            table.add_row(*map(escape, names), delta, mark)
    return table


def _print_tables(diff: Any) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False)
    sweep = diff.kind == "sweep"
    console.print(f"[bold]A[/] {escape(diff.a)}\n[bold]B[/] {escape(diff.b)}")
    if sweep:
        console.print(f"{len(diff.cells)} cell(s) compared, matched by their swept values")
    breaks = [c for c in diff.cells if c.breaks]
    n_breaks = sum(len(c.breaks) for c in diff.cells)
    if breaks:
        console.print(
            _fields_table(
                f"Breaks reproducibility ({n_breaks})", breaks, "breaks", sweep, "bold red"
            )
        )
    else:
        console.print("[bold]Breaks reproducibility[/]: nothing")
    expected = [c for c in diff.cells if c.expected]
    n_expected = sum(len(c.expected) for c in diff.cells)
    if expected:
        console.print(
            _fields_table(
                f"Expected to differ ({n_expected})", expected, "expected", sweep, "bold yellow"
            )
        )
    else:
        console.print("[bold]Expected to differ[/]: nothing")
    if any(c.metrics for c in diff.cells):
        console.print(_metrics_table(diff.cells, diff.atol, sweep))
    else:
        console.print("[bold]Metrics[/]: none recorded")
    if diff.reproducible:
        console.print("[bold green]reproducibility parts match[/]")
    else:
        console.print("[bold red]reproducibility parts differ[/]")


def run(args: argparse.Namespace) -> int:
    from mushin_box._sweep.diff import DiffInputError, diff_provenance

    try:
        diff = diff_provenance(args.a, args.b, atol=args.atol)
    except DiffInputError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        json.dump(_json_safe(diff.to_dict()), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        _print_tables(diff)
    return 0 if diff.reproducible else 1

# SPDX-License-Identifier: MIT
"""The cells of a sweep as ``status`` prints them: aligned columns fitted to the terminal.

Design note: a table squeezed by the terminal is unreadable (``modul…`` headers,
``comple…`` states, an error wrapped into one word fragment per line), so nothing here is
cut inside a word and nothing wraps. The columns are laid out at their natural width, two
spaces apart; when that is wider than the terminal, the table gives way in a fixed order:
swept parameters' headers lose their dotted prefixes (``module.hidden_size`` ->
``hidden_size``), the error column shows the error's type alone (its line, and its file,
follow the table), then whole columns are left out, least needed first (attempt, node,
duration, job, error, the metrics from the last), and a line says which (``--json`` has
every field). The swept values and the
state always stay. A column no cell has a value for is never shown. Piped output is laid
out for ``COLUMNS`` when it is set, and at full width otherwise: a pipe into ``grep`` or a
file loses nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

__all__ = [
    "Column",
    "detail",
    "fit_width",
    "left_out",
    "lines",
    "render",
    "table_columns",
    "terminal_width",
]

_STYLE = {
    "completed": "green",
    "running": "cyan",
    "pending": "dim",
    "failed": "red",
    "timeout": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
}
_GAP = 2


@attrs.define
class Column:
    """One column: its header (and a shorter one), its values, and when it gives way
    (``drop``: left out in this order, lowest first; None: never)."""

    header: str
    values: list[str]
    drop: float | None = None
    short: str | None = None
    #: shorter values (an error's type alone), taken before anything is left out
    narrow: list[str] | None = None

    @property
    def width(self) -> int:
        return max(len(self.header), *(len(v) for v in self.values)) if self.values else 0


def detail(cell: Any) -> str:
    """What a cell is doing now: a running cell's latest epoch and first metric, a pending
    cell's SLURM reason (marked when its job will never start)."""
    from mushin_box._results.table import cell_text

    if cell.state in ("running", "unknown") and cell.epoch is not None:
        metric = f" {cell.metric} {cell_text(cell.metric_value)}" if cell.metric else ""
        return f"epoch {cell.epoch}{metric}"
    if cell.state == "pending" and cell.reason:
        return f"will never start: {cell.reason}" if cell.never_starts else cell.reason
    return ""


def _short_names(params: Sequence[str]) -> dict[str, str]:
    """Each swept parameter's last dotted part, where that names it alone."""
    last = [p.rsplit(".", 1)[-1] for p in params]
    return {p: s for p, s in zip(params, last, strict=True) if last.count(s) == 1 and s != p}


def table_columns(sweep: Any, error_text: Any) -> list[Column]:
    """The columns of ``sweep`` (empty ones left out), in the order they are shown."""
    from mushin_box._results.table import cell_text
    from mushin_box.cli.tables import duration

    cells = sweep.cells
    short = _short_names(sweep.params)
    columns = [
        Column(p, [cell_text(c.combo.get(p, "-")) for c in cells], short=short.get(p))
        for p in sweep.params
    ]
    columns.append(Column("state", [c.state for c in cells]))
    columns.append(Column("detail", [detail(c) for c in cells], drop=9))
    columns.append(Column("attempt", [str(c.attempt or "-") for c in cells], drop=0))
    waiting = any(c.state == "pending" and c.job_id for c in cells)  # its id: to scontrol
    columns.append(Column("job", [c.job_id or "-" for c in cells], drop=8.7 if waiting else 3))
    columns.append(Column("node", [c.host or "-" for c in cells], drop=1))
    columns.append(Column("duration", [duration(c.duration_s) for c in cells], drop=2))
    names = sorted({name for c in cells for name in c.metrics})
    for i, name in enumerate(names):
        values = [cell_text(c.metrics[name]) if name in c.metrics else "-" for c in cells]
        columns.append(Column(name, values, drop=8 - i / (len(names) + 1)))
    types = [(c.error_type or "Error").rsplit(".", 1)[-1] if error_text(c) else "" for c in cells]
    columns.append(Column("error", [error_text(c) for c in cells], drop=4, narrow=types))
    kept = columns[: len(sweep.params) + 1]
    kept += [c for c in columns[len(kept) :] if any(v not in ("", "-") for v in c.values)]
    return kept


def fit_width(columns: list[Column], width: int | None) -> list[str]:
    """Fit ``columns`` (changed in place, see the module's design note) into ``width``;
    the headers of the columns left out. ``None``: no limit."""

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
    dropped: list[Column] = []
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


def render(columns: Sequence[Column], state_column: int) -> Any:
    """The columns as rich Text: a bold header line, then a line per cell (the state
    coloured), each padded to its column's width."""
    from rich.text import Text

    widths = [c.width for c in columns]
    lines = []
    for row in range(-1, len(columns[0].values) if columns else 0):
        line = Text()
        for i, (column, width) in enumerate(zip(columns, widths, strict=True)):
            value = column.header if row < 0 else column.values[row]
            style = "bold" if row < 0 else _STYLE.get(value, "") if i == state_column else ""
            line.append(value, style=style)
            if i < len(columns) - 1:
                line.append(" " * (width - len(value) + _GAP))
        line.rstrip()
        lines.append(line)
    return Text("\n").join(lines)


#: a state's terminal colour (as :data:`_STYLE`, for :func:`lines`)
_ANSI = {"completed": "32", "running": "36", "pending": "2", "failed": "31", "timeout": "31"}
_ANSI.update(cancelled="33", skipped="33")


def lines(columns: Sequence[Column], state_column: int, *, colour: bool) -> Iterator[str]:
    """The lines :func:`render` draws, as plain text (ANSI colours with ``colour``): a
    bold header, then a line per cell, each with its newline."""
    widths = [c.width for c in columns]
    last = len(columns) - 1
    for row in range(-1, len(columns[0].values) if columns else 0):
        parts = []
        for i, (column, width) in enumerate(zip(columns, widths, strict=True)):
            value = column.header if row < 0 else column.values[row]
            pad = "" if i == last else " " * (width - len(value) + _GAP)
            style = _ANSI.get(value) if colour and row >= 0 and i == state_column else None
            parts.append(f"\x1b[{style}m{value}\x1b[0m{pad}" if style else value + pad)
        line = "".join(parts).rstrip()
        yield (f"\x1b[1m{line}\x1b[0m\n" if colour and row < 0 else line + "\n")


def left_out(dropped: Sequence[str], width: int) -> str:
    """The line that names the columns left out, within ``width`` (``+N more`` for the
    names it has no room for)."""
    for shown in range(len(dropped), 0, -1):
        more = f" +{len(dropped) - shown} more" if shown < len(dropped) else ""
        line = f"(left out to fit: {', '.join(dropped[:shown])}{more}; --json has all)"
        if len(line) <= width:
            return line
    return f"({len(dropped)} columns left out to fit; --json has all)"


def terminal_width(console: Any) -> int | None:
    """The width to fit: the terminal's; piped, ``COLUMNS`` when set, else no limit."""
    if console.is_terminal:
        return int(console.width)
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return columns if columns > 0 else None

# SPDX-License-Identifier: MIT
"""What several commands print alike about a sweep: finding it, its summary, a cell's
error on one line, the report a blocking ``launch`` and ``wait`` end with, and ``status``'s
table of cells.

The table is never cut inside a word and never wraps (a squeezed table is unreadable).
Columns are laid out at their natural width, two spaces apart; when that is wider than the
terminal, the table gives way in a fixed order: swept parameters' headers lose their dotted
prefixes, the error column shows the error's type alone, then whole columns are left out,
least needed first, and a line names them (``--json`` has every field). The swept values and
the state always stay; a column no cell has a value for is never shown. Piped output is laid
out for ``COLUMNS`` when set, else at full width: a pipe into ``grep`` loses nothing.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import LAUNCH_FILE, MANIFEST_FILE, STATUS_FILE
from mushin_box.cli.main import EXIT_RUNNING, UsageError
from mushin_box.cli.output import shown

__all__ = [
    "Column",
    "SWEEP_EXITS",
    "cut",
    "detail",
    "duration",
    "end_report",
    "error_line",
    "exit_code",
    "fit_width",
    "left_out",
    "lines",
    "resolve_sweep",
    "resume_hint",
    "summary",
    "table_columns",
    "terminal_width",
]

#: what the exit codes of the commands that report on a sweep's cells mean
#: (``status``, ``wait``, a blocking ``launch``)
SWEEP_EXITS = {
    0: "every cell completed",
    1: "a cell failed, timed out, was cancelled or skipped",
    EXIT_RUNNING: "cells still run or wait, or may (unknown: the scheduler did not answer)",
}
_MAX_ERROR = 80


def resolve_sweep(directory: str | None) -> Path:
    """DIR as given, or the latest sweep under the current directory (a usage error when
    there is none, or DIR is not a sweep)."""
    from mushin_box._sweepdir.board import latest_sweep
    from mushin_box._sweepdir.manifest import is_sweep_dir

    if directory is None:
        found = latest_sweep(".")
        if found is None:
            raise UsageError(
                f"no sweep under {Path.cwd()} (no {MANIFEST_FILE} found 4 levels down); "
                "give the sweep directory: mushin-box status DIR"
            )
        return found.resolve()
    path = Path(directory)
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory; give the working_dir of a run")
    if not is_sweep_dir(path):
        if (path / STATUS_FILE).is_file():
            return path.parent  # a cell directory: show its sweep
        raise UsageError(
            f"{path} is not a sweep directory (no {MANIFEST_FILE}); give the working_dir of "
            "a run, or run `mushin-box ls` to find one"
        )
    return path


def exit_code(sweep: Any) -> int:
    """0 all completed, 1 any cell failed/timed out/cancelled/skipped, 3 still running."""
    if sweep.going:
        return EXIT_RUNNING
    return 0 if all(c.state == "completed" for c in sweep.cells) else 1


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


#: the characters a cut may end after (never inside a word)
_BREAKS = " /:,;.=()"


def cut(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, cut after a word (``…`` marks
    the cut); a first word longer than ``width`` is not cut, but replaced by ``…``.

    >>> cut("CUDA out of memory. Tried to allocate 2.00 GiB", 24)
    'CUDA out of memory.…'
    >>> cut("short", 24), cut("torch.OutOfMemoryError", 12)
    ('short', 'torch.…')
    """
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    head = text[: max(0, width - 1)]
    ends = [i for i, c in enumerate(head) if c in _BREAKS]
    if not ends:
        return "…"
    end = ends[-1]
    kept = head[: end + 1] if head[end] != " " else head[:end]
    return kept.rstrip() + "…"


def error_line(cell: Any, width: int = _MAX_ERROR) -> str:
    """A cell's error on one line, at most ``width`` characters, cut after a word."""
    if not cell.error_type and not cell.error_message:
        return ""
    return cut(f"{cell.error_type or 'Error'}: {cell.error_message or ''}".strip(), width)


def resume_hint(root: Path | str) -> str:
    """How to run a sweep's unfinished cells again: ``mushin-box resume DIR`` where a
    launch recorded itself there (it replays that record), else ``Workflow.run``'s
    ``resume=True``, the only way for a sweep started from Python (``resume DIR`` would
    refuse it: there is no record to replay)."""
    if (Path(root) / LAUNCH_FILE).is_file():
        return f"mushin-box resume {shlex.quote(str(root))}"
    return f"Workflow.run(..., working_dir={str(root)!r}, resume=True)"


def summary(sweep: Any) -> str:
    """``2 completed, 1 failed`` (and what runs the sweep, when known)."""
    counts = ", ".join(f"{n} {state}" for state, n in sweep.counts().items())
    return counts + (f" (launcher {sweep.launcher})" if sweep.launcher else "")


def end_report(sweep: Any, resume: str) -> int:
    """The summary a blocking launch and ``wait`` end with: a line per cell (state, cell,
    scalar metrics), a line per failed cell (its error and error file), and on stderr how
    many did not complete and ``resume``, the way to run only those again. 0 when every
    cell completed, else 1."""
    from mushin_box._results.table import cell_text

    print(f"[mushin-box] {sweep.root}: {summary(sweep)}")
    for cell in sweep.cells:
        values = " ".join(f"{k}={cell_text(v)}" for k, v in sorted(cell.metrics.items()))
        if cell.state == "completed" and not values:  # no metrics: the status says why
            values = detail(cell)
        elif cell.restarts:
            values += f"  {restart_text(cell)}"
        print(shown(f"  {cell.state:<9} {cell.dir or cell.combo}  {values}".rstrip()))
    failed = [c for c in sweep.cells if c.state != "completed"]
    for cell in failed:
        if cell.error_type or cell.error_message:
            where = f" (see {cell.error_file})" if cell.error_file else ""
            print(shown(f"  {cell.dir}: {cell.state}: {error_line(cell)}{where}"))
    if failed:
        print(
            f"[mushin-box] {len(failed)} cell(s) did not complete; to run only those "
            f"again: {resume}",
            file=sys.stderr,
        )
    return 1 if failed else 0


# ---------------------------------------------------------------- status's table of cells

#: a state's terminal colour (ANSI SGR)
_ANSI = {"completed": "32", "running": "36", "pending": "2", "failed": "31", "timeout": "31"}
_ANSI.update(cancelled="33", skipped="33")
_GAP = 2


@attrs.define
class Column:
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


def detail(cell: Any) -> str:
    """What a cell is doing now: a running cell's latest epoch and first metric, a pending
    cell's SLURM reason (marked when its job will never start)."""
    from mushin_box._results.table import cell_text

    if cell.state in ("running", "unknown") and (cell.epoch is not None or cell.restarts):
        metric = f" {cell.metric} {cell_text(cell.metric_value)}" if cell.metric else ""
        now = f"epoch {cell.epoch}{metric}" if cell.epoch is not None else ""
        if not cell.restarts:
            return now
        left = f", {cell.restarts_left} left" if cell.restarts_left is not None else ""
        return f"restarting ({cell.restarts}{left})" + (f": {now}" if now else "")
    if cell.state in ("completed", "failed") and cell.restarts:
        return restart_text(cell)
    if cell.state == "pending" and cell.reason:
        return f"will never start: {cell.reason}" if cell.never_starts else cell.reason
    if cell.state == "completed" and not cell.metrics and cell.reason:
        return cell.reason  # a continuing attempt that reported nothing (NO_METRICS)
    return ""


def restart_text(cell: Any) -> str:
    """``after 1 restart (rank 1 on node2 was killed ...; 0 left)``: what a cell
    that torchrun restarted (or SLURM requeued) went through; "" for none."""
    if not cell.restarts:
        return ""
    said = []
    after = cell.restarted_after
    if after:
        where = f" on {after['host']}" if after.get("host") else ""
        how, signal, code = after.get("ended"), after.get("signal"), after.get("exitcode")
        ended = (
            f"raised {how}"
            if how
            else f"was killed by {signal}"
            if signal
            else f"exited with code {code}, no error recorded"
            if code
            else "was killed or crashed, no error recorded"
        )
        epoch = after.get("epoch")
        again = f", restarted from epoch {epoch}" if isinstance(epoch, int) else ""
        said.append(f"rank {after.get('rank')}{where} {ended}{again}")
    if cell.restarts_left is not None:
        said.append(f"{cell.restarts_left} left")
    times = "restart" if cell.restarts == 1 else "restarts"
    return f"after {cell.restarts} {times}" + (f" ({'; '.join(said)})" if said else "")


def _short_names(params: Sequence[str]) -> dict[str, str]:
    """Each swept parameter's last dotted part, where that names it alone."""
    last = [p.rsplit(".", 1)[-1] for p in params]
    return {p: s for p, s in zip(params, last, strict=True) if last.count(s) == 1 and s != p}


def table_columns(sweep: Any, error_text: Any) -> list[Column]:
    """The columns of ``sweep`` (empty ones left out), in the order they are shown."""
    from mushin_box._results.table import cell_text

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


def lines(columns: Sequence[Column], state_column: int, *, colour: bool) -> Iterator[str]:
    """A bold header, then a line per cell (its state coloured with ``colour``), each
    padded to its column's width and ending with its newline."""
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
    for named in range(len(dropped), 0, -1):
        more = f" +{len(dropped) - named} more" if named < len(dropped) else ""
        line = f"(left out to fit: {', '.join(dropped[:named])}{more}; --json has all)"
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

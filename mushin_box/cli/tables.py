# SPDX-License-Identifier: MIT
"""What several commands print alike about a sweep: finding it, its one-line summary, its
cells as a table, and the report a blocking ``launch`` and ``wait`` end with.

Exit codes, for scripts: 0 every cell completed, 1 a cell failed, timed out, was cancelled
or skipped, :data:`EXIT_RUNNING` (3) cells still run or wait (a pending cell counts only
while a driver or a SLURM job of the sweep lives), 2 bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mushin_box.cli.main import EXIT_RUNNING, UsageError

__all__ = [
    "LONG_TABLE",
    "SWEEP_EXITS",
    "duration",
    "end_report",
    "error_line",
    "exit_code",
    "resolve_sweep",
    "summary",
    "table",
]

#: what the exit codes of the commands that report on a sweep's cells mean
#: (``status``, ``wait``, a blocking ``launch``)
SWEEP_EXITS = {
    0: "every cell completed",
    1: "a cell failed, timed out, was cancelled or skipped",
    EXIT_RUNNING: "cells still run or wait, or may (unknown: the scheduler did not answer)",
}
_STYLE = {
    "completed": "green",
    "running": "cyan",
    "pending": "dim",
    "failed": "red",
    "timeout": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
}
_MAX_ERROR = 80


def resolve_sweep(directory: str | None) -> Path:
    """DIR as given, or the latest sweep under the current directory (a usage error when
    there is none, or DIR is not a sweep)."""
    from mushin_box._core.layout import MANIFEST_FILE, STATUS_FILE
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


def error_line(cell: Any) -> str:
    """A cell's error on one line, cut to a table's width."""
    if not cell.error_type and not cell.error_message:
        return ""
    text = f"{cell.error_type or 'Error'}: {cell.error_message or ''}".strip()
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 1] + "…"


def summary(sweep: Any) -> str:
    """``2 completed, 1 failed`` (and what runs the sweep, when known)."""
    counts = ", ".join(f"{n} {state}" for state, n in sweep.counts().items())
    return counts + (f" (launcher {sweep.launcher})" if sweep.launcher else "")


#: a table with more rows than this is printed as aligned text (see :func:`table`)
LONG_TABLE = 100


def _rows(sweep: Any) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows, as text: swept values, state, attempt, job, node,
    duration, scalar metrics, error."""
    from mushin_box._results.table import cell_text

    metric_names = sorted({name for c in sweep.cells for name in c.metrics})
    header = [*sweep.params, "state", "attempt", "job", "node", "duration", *metric_names, "error"]
    rows = [
        [
            *(cell_text(cell.combo.get(p, "-")) for p in sweep.params),
            cell.state,
            str(cell.attempt or "-"),
            cell.job_id or "-",
            cell.host or "-",
            duration(cell.duration_s),
            *(cell_text(cell.metrics[m]) if m in cell.metrics else "-" for m in metric_names),
            error_line(cell),
        ]
        for cell in sweep.cells
    ]
    return header, rows


def table(sweep: Any) -> Any:
    """The cells of a sweep as a rich renderable: a table, or, past :data:`LONG_TABLE`
    rows, the same columns as aligned text (rich measures and wraps every cell of a table:
    1 s for 1,000 cells, five times the rest of the command)."""
    from rich.table import Table
    from rich.text import Text

    header, rows = _rows(sweep)
    state = len(sweep.params)
    if len(rows) > LONG_TABLE:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = []
        for row in [header, *rows]:
            line = Text()
            for i, (value, width) in enumerate(zip(row, widths, strict=True)):
                style = _STYLE.get(value, "") if i == state and row is not header else ""
                line.append(value, style=style or ("bold" if row is header else ""))
                line.append(" " * (width - len(value) + 2))
            line.rstrip()
            lines.append(line)
        return Text("\n").join(lines)  # printed with soft_wrap: a line per cell
    out = Table()
    for name in header:
        out.add_column(Text(name), overflow="fold" if name == "error" else "ellipsis")
    for row in rows:
        out.add_row(
            *(Text(v, style=_STYLE.get(v, "") if i == state else "") for i, v in enumerate(row))
        )
    return out


def end_report(sweep: Any, resume: str) -> int:
    """The summary a blocking launch and ``wait`` end with: a line per cell (state, cell,
    scalar metrics), a line per failed cell (its error and error file), and on stderr how
    many did not complete and ``resume``, the way to run only those again. 0 when every
    cell completed, else 1."""
    from mushin_box._results.table import cell_text

    print(f"[mushin-box] {sweep.root}: {summary(sweep)}")
    for cell in sweep.cells:
        values = " ".join(f"{k}={cell_text(v)}" for k, v in sorted(cell.metrics.items()))
        print(f"  {cell.state:<9} {cell.dir or cell.combo}  {values}".rstrip())
    failed = [c for c in sweep.cells if c.state != "completed"]
    for cell in failed:
        if cell.error_type or cell.error_message:
            where = f" (see {cell.error_file})" if cell.error_file else ""
            print(f"  {cell.dir}: {cell.state}: {error_line(cell)}{where}")
    if failed:
        print(
            f"[mushin-box] {len(failed)} cell(s) did not complete; to run only those "
            f"again: {resume}",
            file=sys.stderr,
        )
    return 1 if failed else 0

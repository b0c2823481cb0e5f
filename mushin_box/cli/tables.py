# SPDX-License-Identifier: MIT
"""What several commands print alike about a sweep: finding it, its summary, a cell's
state and error on one line, aligned lines of a table, and the report a blocking ``launch``
and ``wait`` end with.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.layout import LAUNCH_FILE, MANIFEST_FILE, STATUS_FILE
from mushin_box.cli.main import EXIT_RUNNING, UsageError
from mushin_box.cli.output import shown

#: what the exit codes of the commands that report on a sweep's cells mean
#: (``status``, ``wait``, a blocking ``launch``)
SWEEP_EXITS = {
    0: "every cell completed",
    1: "a cell failed, timed out, was cancelled or skipped",
    EXIT_RUNNING: "cells still run or wait, or may (unknown: the scheduler did not answer)",
}
_MAX_ERROR = 80


def resolve_sweep(directory: str | None) -> Path:
    """DIR as given (a cell's: its sweep), or the latest sweep under the current directory."""
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


def exit_code(sweep: Any) -> int:  # SWEEP_EXITS
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
    end = max((i for i, c in enumerate(head) if c in _BREAKS), default=-1)
    return head[: end + 1].rstrip() + "…"


def error_line(cell: Any, width: int = _MAX_ERROR) -> str:
    """A cell's error on one line, at most ``width`` characters, cut after a word."""
    if not cell.error_type and not cell.error_message:
        return ""
    return cut(f"{cell.error_type or 'Error'}: {cell.error_message or ''}".strip(), width)


def resume_hint(root: Path | str) -> str:
    """How to run a sweep's unfinished cells again: ``resume DIR`` replays a launch record,
    which a sweep started from Python has not."""
    if (Path(root) / LAUNCH_FILE).is_file():
        return f"mushin-box resume {shlex.quote(str(root))}"
    return f"Workflow.run(..., working_dir={str(root)!r}, resume=True)"


def summary(sweep: Any) -> str:
    """``2 completed, 1 failed`` (and what runs the sweep, when known)."""
    counts = ", ".join(f"{n} {state}" for state, n in sweep.counts().items())
    return counts + (f" (launcher {sweep.launcher})" if sweep.launcher else "")


class Heading(list[str]):
    """A finished sweep's summary line, printed as soon as its view is read (before its
    cells are) and kept, so that the table after it does not print it again."""

    def __call__(self, view: Any) -> None:
        self.append(f"{view.root}: {summary(view)}")
        print(self[0], flush=True)


def end_report(sweep: Any, resume: str) -> int:
    """The summary a blocking launch and ``wait`` end with: a line per cell, a line per
    failed cell's error, and on stderr how to run those again (``resume``); its exit code."""
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


#: a state's terminal colour (ANSI SGR)
ANSI = {"completed": "32", "running": "36", "pending": "2", "failed": "31", "timeout": "31"}
ANSI.update(cancelled="33", skipped="33")


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


def print_lines(
    console: Any,
    rows: Sequence[Sequence[str]],
    state_column: int,
    *,
    right: Sequence[bool] = (),
    bold: Sequence[bool] = (),
    palette: Mapping[str, str] = ANSI,
) -> None:
    """``rows`` (the headers first) as lines of aligned columns on a rich ``console``; where
    it shows colour, each state in its ``palette`` colour, and bold the header and the rows
    ``bold`` marks. Plain text with ANSI styles, not rich's: rich measures and styles every
    line, which a 10,000-cell table cannot afford."""
    colour = console.is_terminal and console.color_system is not None and not console.no_color
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for at, row in enumerate(rows):
        parts = [
            value.rjust(width) if i < len(right) and right[i] else value.ljust(width)
            for i, (value, width) in enumerate(zip(row, widths, strict=True))
        ]
        style = palette.get(row[state_column]) if colour and at else None
        if style:  # its colour off after it: a bold line stays bold
            state = parts[state_column]
            word = state.rstrip()
            parts[state_column] = f"\x1b[{style}m{word}\x1b[39m" + state[len(word) :]
        line = "  ".join(parts).rstrip()
        if colour and (at == 0 or (at <= len(bold) and bold[at - 1])):
            line = f"\x1b[1m{line}\x1b[0m"
        console.file.write(line + "\n")
    console.file.flush()

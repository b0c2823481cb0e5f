# SPDX-License-Identifier: MIT
"""What several commands print alike about a sweep: finding it, its one-line summary, a
cell's error on one line, and the report a blocking ``launch`` and ``wait`` end with
(``status``'s table of cells is :mod:`mushin_box.cli.celltable`).

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
    "SWEEP_EXITS",
    "cut",
    "duration",
    "end_report",
    "error_line",
    "exit_code",
    "resolve_sweep",
    "resume_hint",
    "summary",
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
    import shlex

    from mushin_box._core.layout import LAUNCH_FILE

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

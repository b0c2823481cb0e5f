# SPDX-License-Identifier: MIT
"""Progress over sweep cells, fed by the cell sidecars: a bar with the cells by state, the
elapsed time and an ETA from the cells finished so far.

It works for any launcher whose cells write to this filesystem (in this process, in local
child processes, in SLURM jobs on other nodes), because it reads only the status files:
no ``squeue``/``sacct`` is polled to draw it. :class:`CellProgress` runs beside a blocking
``Workflow.run``; :class:`SweepFollower` is the same bar for ``mushin-box wait``, which also
asks SLURM whether the owners of running cells live (at the caller's interval).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from mushin_box._core.layout import DONE_CELL_STATES as _DONE

__all__ = ["CellProgress", "SweepFollower"]


def _bar() -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]cells"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[detail]}"),
    )


def _detail(counts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v)


class CellProgress:
    """A bar over the cells of a running sweep, redrawn every ``period_s`` from the sidecars.

    Cells reused from an earlier run count as ``reused``: they cost nothing, so the ETA is
    measured from the cells this run finished.
    """

    def __init__(self, root: Path, *, total: int, run_id: str, period_s: float = 0.5) -> None:
        self.root = root
        self.total = total
        self.run_id = run_id
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="mushin-progress")
        self._progress: Any = None
        self._task: Any = None

    def _counts(self) -> dict[str, int]:
        from mushin_box._sweepdir.manifest import cell_records

        counts: dict[str, int] = {}
        for _, record in cell_records(self.root):
            status = str(record.get("status"))
            reused = status == "completed" and record.get("run_id") != self.run_id
            key = "reused" if reused else status
            counts[key] = counts.get(key, 0) + 1
        started = sum(counts.values())
        counts["pending"] = counts.get("pending", 0) + max(0, self.total - started)
        return counts

    def _update(self) -> None:
        counts = self._counts()
        done = sum(counts.get(s, 0) for s in (*_DONE, "reused"))
        self._progress.update(self._task, completed=min(done, self.total), detail=_detail(counts))

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._update()

    def start(self) -> CellProgress:
        self._progress = _bar()
        self._task = self._progress.add_task("cells", total=self.total, detail="")
        self._progress.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._update()
        self._progress.stop()


class SweepFollower:
    """The bar for a sweep followed from outside its driver (``mushin-box wait``).

    Each :meth:`update` reads the sweep (:func:`mushin_box._sweepdir.board.read_sweep`, which
    checks that the owners of running cells live) and redraws; the caller sets the pace.
    """

    def __init__(self, root: Path, *, show: bool = True) -> None:
        self.root = root
        self.show = show
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepFollower:
        if self.show:
            self._progress = _bar()
            self._progress.start()
        return self

    def update(self) -> Any:
        from mushin_box._sweepdir.board import read_sweep

        sweep = read_sweep(self.root)
        if self._progress is not None:
            counts = sweep.counts()
            done = sum(counts.get(s, 0) for s in _DONE)
            if self._task is None:
                self._task = self._progress.add_task("cells", total=len(sweep.cells), detail="")
            self._progress.update(
                self._task, total=len(sweep.cells), completed=done, detail=_detail(counts)
            )
        return sweep

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

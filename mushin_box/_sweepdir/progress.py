# SPDX-License-Identifier: MIT
"""Progress over sweep cells from their status files alone (any launcher, no ``squeue``
polled): a bar with the cells by state, the elapsed time and an ETA (the mean wall time of
the cells this run finished, times the cells left, over the most seen running at once).
:class:`CellProgress` runs beside a blocking ``Workflow.run``; :class:`SweepFollower` is
``mushin-box wait``'s bar, which also asks whether running cells' owners live.

While the bar is drawn, cells run in this process (``launch --local``) would log onto the
real stderr, glued to the bar: every logging handler that writes to this terminal writes
through the bar's console instead, and Lightning's per-cell :data:`NOTICES` and warnings a
user can do nothing about are left out (:class:`QuietTerminal`).
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mushin_box._core.layout import DONE_CELL_STATES as _DONE
from mushin_box._sweepdir.board import read_sweep
from mushin_box._sweepdir.manifest import cell_records

#: the first words (after any ``-`` rule) of Lightning's notices each cell repeats, and
#: the loggers that say them
NOTICES = (
    "GPU available:",
    "TPU available:",
    "HPU available:",
    "IPU available:",
    "LOCAL_RANK:",
    "Initializing distributed:",
    "distributed_backend=",
    "💡 Tip:",
    "`Trainer.fit` stopped:",
)
_NOTICE_LOGGERS = tuple(
    f"{package}.{module}"
    for package in (
        "pytorch_lightning",
        "lightning_fabric",
        "lightning.pytorch",
        "lightning.fabric",
    )
    for module in ("utilities.rank_zero", "utilities.distributed", "accelerators.cuda")
) + ("lightning_utilities.core.rank_zero",)
#: warnings (message, module) Lightning repeats per cell that a user can do nothing about:
#: the hint to use srun (``--local`` does not, by design), a non-empty checkpoint directory
#: (a continued fit keeps it on purpose), and its own use of an API torch deprecated
_WARNINGS = (
    (r"The `srun` command is available on your system but is not used", ""),
    (r"Checkpoint directory .* exists and is not empty", r"(pytorch_)?lightning[.\w]*"),
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", r"(pytorch_)?lightning[.\w]*"),
)


class _Notices(logging.Filter):
    """Leaves out the records whose message starts with one of :data:`NOTICES`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a record that can't be formatted is not ours to judge
            return True
        return not text.lstrip("-\n ").startswith(NOTICES)


class QuietTerminal:
    """While active: Lightning's :data:`NOTICES` and known warnings are left out, and after
    :meth:`redirect` every logging handler that wrote to this terminal writes to the new
    ``sys.stdout``/``sys.stderr`` (the bar's console). :meth:`exit` undoes both."""

    def __init__(self) -> None:
        self._filter = _Notices()
        self._streams = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
        self._moved: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._warnings: list[Any] = []

    def enter(self) -> None:
        for name in _NOTICE_LOGGERS:
            logging.getLogger(name).addFilter(self._filter)
        for message, module in _WARNINGS:
            warnings.filterwarnings("ignore", message=message, module=module)
            self._warnings.append(warnings.filters[0])

    def __enter__(self) -> QuietTerminal:  # without a bar: the notices left out alone
        self.enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.exit()

    def redirect(self) -> None:
        """Point the terminal's logging handlers at the current ``sys.stdout``/``stderr``."""
        for handler in _stream_handlers():
            stream = handler.stream
            if any(stream is s for s in self._streams if s is not None):
                out = sys.stdout if stream in (self._streams[0], self._streams[2]) else sys.stderr
                if out is not stream:  # (setStream answers None for the same stream)
                    handler.setStream(out)
                    self._moved.append((handler, stream))

    def exit(self) -> None:
        for handler, stream in self._moved:
            handler.setStream(stream)
        self._moved.clear()
        for name in _NOTICE_LOGGERS:
            logging.getLogger(name).removeFilter(self._filter)
        filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list at runtime
        for added in self._warnings:
            if added in filters:
                filters.remove(added)
        warnings._filters_mutated()  # type: ignore[attr-defined]  # as filterwarnings does
        self._warnings.clear()


def _stream_handlers() -> Iterable[logging.StreamHandler[Any]]:
    known = logging.Logger.manager.loggerDict.values()
    for logger in [logging.getLogger(), *(x for x in known if isinstance(x, logging.Logger))]:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler
            ):
                yield handler


def eta_text(durations: Iterable[float], left: int, parallel: int) -> str:
    """The time left, ``H:MM:SS``: the mean of ``durations`` times the ``left`` cells, over
    ``parallel`` at once; ``-:--:--`` before any finished.

    >>> eta_text([60.0, 120.0], left=4, parallel=2), eta_text([], 3, 1), eta_text([5.0], 0, 1)
    ('0:03:00', '-:--:--', '0:00:00')
    """
    done = [d for d in durations if d >= 0]
    if not done:
        return "-:--:--"
    seconds = int(round(sum(done) / len(done) * left / max(1, parallel)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _bar() -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[bold]cells"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TextColumn("[cyan]{task.fields[eta]}"),
        TextColumn("{task.fields[detail]}"),
    )


def _draw(
    bar: Any,
    task: Any,
    counts: dict[str, int],
    durations: Iterable[float],
    total: int,
    parallel: int,
) -> None:
    done = sum(counts.get(s, 0) for s in (*_DONE, "reused"))
    eta = eta_text(durations, max(0, total - done), parallel)
    detail = " ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v)
    bar.update(task, total=total, completed=min(done, total), detail=detail, eta=eta)


class CellProgress:
    """A bar over the cells of a running sweep, redrawn every ``period_s`` from the sidecars.
    Cells reused from an earlier run count as ``reused``, and not towards the ETA."""

    def __init__(self, root: Path, *, total: int, run_id: str, period_s: float = 0.5) -> None:
        self.root = root
        self.total = total
        self.run_id = run_id
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="mushin-progress")
        self._progress: Any = None
        self._task: Any = None
        self._quiet = QuietTerminal()
        self._parallel = 1  # the most cells seen running at once

    def _counts(self) -> tuple[dict[str, int], list[float]]:
        counts: dict[str, int] = {}
        durations: list[float] = []
        for _, record in cell_records(self.root):
            status = str(record.get("status"))
            reused = status == "completed" and record.get("run_id") != self.run_id
            key = "reused" if reused else status
            counts[key] = counts.get(key, 0) + 1
            value = record.get("duration_s")
            if key in _DONE and isinstance(value, int | float) and not isinstance(value, bool):
                durations.append(float(value))
        started = sum(counts.values())
        counts["pending"] = counts.get("pending", 0) + max(0, self.total - started)
        return counts, durations

    def _update(self) -> None:
        counts, durations = self._counts()
        self._parallel = max(self._parallel, counts.get("running", 0))
        _draw(self._progress, self._task, counts, durations, self.total, self._parallel)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._update()

    def start(self) -> CellProgress:
        self._quiet.enter()
        self._progress = _bar()
        self._task = self._progress.add_task("cells", total=self.total, detail="", eta="-:--:--")
        self._progress.start()  # sys.stdout and sys.stderr now write above the bar
        self._quiet.redirect()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self._update()
            self._progress.stop()
        finally:
            self._quiet.exit()


class SweepFollower:
    """The bar for a sweep followed from outside its driver (``mushin-box wait``): each
    :meth:`update` reads the sweep (checking running cells' owners) and redraws."""

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
        sweep = read_sweep(self.root)
        if self._progress is not None:
            if self._task is None:
                self._task = self._progress.add_task(
                    "cells", total=len(sweep.cells), detail="", eta="-:--:--"
                )
            counts = sweep.counts()
            durations = [c.duration_s for c in sweep.cells if c.state in _DONE and c.duration_s]
            running = counts.get("running", 0)
            _draw(self._progress, self._task, counts, durations, len(sweep.cells), running)
        return sweep

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

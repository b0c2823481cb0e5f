# SPDX-License-Identifier: MIT
"""A finished sweep's cells as ``show`` and ``report`` read them: its manifest
(:func:`~mushin_box._sweepdir.settled.finished_entries`, which says when it cannot answer)
and one metrics file per completed cell.

The cells come out in ``read_sweep``'s order (the grid's, then cells of an earlier grid by
directory name), with the same state, attempt, error, reason and metrics; the fields only
``status`` and ``ls`` show (host, pid, times, logs) are not read.

Examples
--------
>>> import tempfile
>>> from mushin_box._core.sidecars import write_json_atomic
>>> root = Path(tempfile.mkdtemp())
>>> write_json_atomic(root / "lr=0.1" / "mushin_status.json",
...                   {"combo": {"lr": 0.1}, "status": "completed"})
>>> write_json_atomic(root / "lr=0.1" / "mushin_metrics.json", {"loss": 0.5})
>>> write_json_atomic(root / "mushin_sweep.json", {"grid": {"lr": [0.1]}, "params": ["lr"],
...     "cells": {'{"lr":0.1}': {"combo": {"lr": 0.1}, "status": "completed", "dir": "lr=0.1"}}})
>>> sweep = read_finished(root)
>>> [(c.dir, c.state, c.metrics) for c in sweep.cells]
[('lr=0.1', 'completed', {'loss': 0.5})]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mushin_box._core.gcpause import gc_paused
from mushin_box._core.layout import ERROR_FILE, METRICS_FILE
from mushin_box._sweepdir.board import CellView, SweepView, scalar_metrics
from mushin_box._sweepdir.gridorder import Entry
from mushin_box._sweepdir.settled import Heading, bare_view, finished_entries, read_object

__all__ = ["read_finished", "read_results"]


def _view(base: str, entry: Entry) -> CellView:
    name = entry.get("dir")
    state = str(entry.get("status"))
    raw = entry.get("error")
    error: dict[str, Any] = raw if isinstance(raw, dict) else {}
    metrics = None
    error_file = None
    if name is not None:
        cell = os.path.join(base, name)
        if state == "completed":
            metrics = read_object(os.path.join(cell, METRICS_FILE))
        elif os.path.isfile(os.path.join(cell, ERROR_FILE)):
            error_file = os.path.join(cell, ERROR_FILE)
    attempt = entry.get("attempt", 0)
    reason = entry.get("reason")
    return CellView(
        dir=name,
        combo=dict(entry["combo"]),
        state=state,
        recorded_state=state,
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0,
        metrics=scalar_metrics(metrics),
        error_type=error.get("type"),
        error_message=(error.get("message") or reason) if error else None,
        error_file=error_file,
        reason=reason if isinstance(reason, str) else None,
    )


@gc_paused()  # a bulk read: see _core/gcpause.py
def read_finished(
    root: str | os.PathLike[str], heading: Callable[[Heading], None] | None = None
) -> SweepView | None:
    """A finished sweep's view (the cells as ``read_sweep`` shows them, with their scalar
    metrics), from its manifest and each completed cell's metrics; None when the manifest
    cannot answer (see :mod:`mushin_box._sweepdir.settled`). ``heading``: called with its
    :class:`~mushin_box._sweepdir.settled.Heading` before any metrics file is read (a first
    line printed at once)."""
    import attrs

    found = finished_entries(root)
    if found is None:
        return None
    manifest, entries = found
    view, head = bare_view(Path(root), manifest, entries)
    if heading is not None:
        heading(head)
    base = os.fspath(root)
    return attrs.evolve(view, cells=tuple(_view(base, e) for e in entries))


def read_results(
    root: str | os.PathLike[str], heading: Callable[[Heading], None] | None = None
) -> SweepView:
    """The sweep as ``show`` and ``report`` read it: from the manifest when it is finished
    (:func:`read_finished`, which calls ``heading``), else by
    :func:`~mushin_box._sweepdir.board.read_sweep`."""
    from mushin_box._sweepdir.board import read_sweep

    path = Path(root)
    if path.is_dir():
        try:
            view = read_finished(path, heading)
        except OSError:  # gone or unreadable mid-read: read_sweep says what
            view = None
        if view is not None:
            return view
    return read_sweep(path)

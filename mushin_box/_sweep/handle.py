# SPDX-License-Identifier: MIT
"""``Workflow.run(..., wait=False)``: a handle on a sweep whose jobs run without its driver.

The handle holds nothing but the sweep directory: everything it says it reads from the
sidecars (:mod:`mushin_box._sweepdir.board`) and SLURM, so ``SweepHandle(dir)`` rebuilt in
another process, on another login node, a week later, is the same handle.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mushin_box._core.targets import public
from mushin_box._slurm.submitted import job_ids, read_submission
from mushin_box._sweepdir.board import SweepView, read_sweep
from mushin_box._sweepdir.cancel import CancelReport, cancel

if TYPE_CHECKING:  # pragma: no cover - xarray loads with the results, not with the handle
    import xarray as xr


@public
class SweepHandle:
    """A sweep that runs on its own (``Workflow.run(..., wait=False)``, ``launch --detach``).

    Parameters
    ----------
    working_dir : path
        The sweep directory: all a handle needs, so it can be rebuilt from it anywhere.

    Examples
    --------
    A sweep as its cells leave it (written here by hand; ``Workflow.run`` writes the same):

    >>> import tempfile
    >>> from mushin_box import SweepHandle
    >>> from mushin_box._core.sidecars import write_json_atomic
    >>> root = Path(tempfile.mkdtemp())
    >>> write_json_atomic(root / "mushin_sweep.json", {"grid": {"x": [1, 2]}, "cells": {}})
    >>> for x in (1, 2):
    ...     cell = root / f"x={x}"
    ...     write_json_atomic(cell / "mushin_status.json",
    ...                       {"combo": {"x": x}, "status": "completed", "attempt": 1})
    ...     write_json_atomic(cell / "mushin_metrics.json", {"y": 2 * x})
    >>> handle = SweepHandle(root)
    >>> handle.done(), handle.status().counts()
    (True, {'completed': 2})
    >>> handle.wait()["y"].values.tolist()
    [2, 4]
    """

    def __init__(self, working_dir: str | os.PathLike[str]) -> None:
        self.working_dir = Path(working_dir).resolve()

    def __repr__(self) -> str:
        return f"SweepHandle({str(self.working_dir)!r})"

    @property
    def job_ids(self) -> list[str]:
        """The SLURM job ids of the latest submission (``[]`` for a local one)."""
        return job_ids(read_submission(self.working_dir))

    def status(self) -> SweepView:
        """The sweep now: its cells (:class:`mushin_box.CellView`), their states and
        ``counts()``, with the owners of running cells checked."""
        return read_sweep(self.working_dir)

    def done(self) -> bool:
        """Nothing of the sweep runs or waits any more."""
        return not self.status().going

    def wait(self, timeout_s: float | None = None, interval_s: float = 5.0) -> xr.Dataset:
        """Block until the sweep is done; return its results (``load_experiment``).

        Raises
        ------
        TimeoutError
            Still running after ``timeout_s``; the jobs go on (:meth:`cancel` stops them).
        """
        # lazy: the results bring xarray, numpy and pandas, which a handle needs only here
        from mushin_box._results.experiment import load_experiment

        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.done():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.working_dir} still running after {timeout_s:g} s; its jobs go on "
                    "(SweepHandle.cancel() stops them)"
                )
            time.sleep(interval_s)
        return load_experiment(self.working_dir)

    def cancel(self, cells: Sequence[str] | None = None, grace_s: float = 10.0) -> CancelReport:
        """Stop its running cells (all, or those named): see ``mushin-box cancel``."""
        return cancel(self.working_dir, cells, grace_s=grace_s)

# SPDX-License-Identifier: MIT
"""The jobs a launch leaves out, and how it gets the others' configs: set by the sweep
driver, read by its Hydra sweeper.

``Workflow.run`` decides the completed cells of a resumed sweep before launching
(:mod:`mushin_box._sweep.prefilter`), and knows how to check and compose a batch of jobs
cheaply (:func:`mushin_box._sweep.jobconfig.job_configs`); the sweeper plugin
(``hydra_plugins.mushin_box_launcher.cells_sweeper``), which runs in the same process and may
import only ``_core`` and ``_slurm``, reads both here.

Examples
--------
>>> with skipping(frozenset({("x=1",)})):
...     skipped_jobs()
frozenset({('x=1',)})
>>> skipped_jobs()
frozenset()
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

_SKIPPED: frozenset[tuple[str, ...]] = frozenset()
_VALIDATE: Callable[[Any, Any, Any], Any] | None = None


@contextlib.contextmanager
def skipping(
    reused: frozenset[tuple[str, ...]], validate: Callable[[Any, Any, Any], Any] | None = None
) -> Iterator[None]:
    """Leave out ``reused`` (jobs' task overrides) for the duration of one launch; with
    ``validate(config_loader, sweep_config, batch)``, check a batch instead of Hydra
    composing each of its jobs to check it, and return what composes the batch's jobs for
    the launcher (``.master``, ``.load(job)``), or None: it could not tell, Hydra checks
    and composes."""
    global _SKIPPED, _VALIDATE
    before = _SKIPPED, _VALIDATE
    _SKIPPED, _VALIDATE = reused, validate
    try:
        yield
    finally:
        _SKIPPED, _VALIDATE = before


def batch_configs() -> Callable[[Any, Any, Any], Any] | None:
    """The current launch's quick check of a batch, if any (see :func:`skipping`)."""
    return _VALIDATE


def skipped_jobs() -> frozenset[tuple[str, ...]]:
    """The jobs the current launch leaves out."""
    return _SKIPPED

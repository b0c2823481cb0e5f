# SPDX-License-Identifier: MIT
"""The jobs a launch leaves out: set by the sweep driver, read by its Hydra sweeper.

``Workflow.run`` decides the completed cells of a resumed sweep before launching
(:mod:`mushin_box._sweep.prefilter`); the sweeper plugin
(``hydra_plugins.mushin_box_launcher.cells_sweeper``), which runs in the same process and may
import only ``_core`` and ``_slurm``, reads the set here.

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

__all__ = ["batch_validator", "skipped_jobs", "skipping"]

_SKIPPED: frozenset[tuple[str, ...]] = frozenset()
_VALIDATE: Callable[[Any, Any, Any], bool] | None = None


@contextlib.contextmanager
def skipping(
    reused: frozenset[tuple[str, ...]], validate: Callable[[Any, Any, Any], bool] | None = None
) -> Iterator[None]:
    """Leave out ``reused`` (jobs' task overrides) for the duration of one launch; with
    ``validate(config_loader, sweep_config, batch)``, check a batch before Hydra composes
    each of its jobs to check it (``False``: it could not tell, Hydra checks)."""
    global _SKIPPED, _VALIDATE
    before = _SKIPPED, _VALIDATE
    _SKIPPED, _VALIDATE = reused, validate
    try:
        yield
    finally:
        _SKIPPED, _VALIDATE = before


def batch_validator() -> Callable[[Any, Any, Any], bool] | None:
    """The current launch's quick batch check, if any."""
    return _VALIDATE


def skipped_jobs() -> frozenset[tuple[str, ...]]:
    """The jobs the current launch leaves out."""
    return _SKIPPED

# SPDX-License-Identifier: MIT
"""The jobs a launch leaves out, and how it gets the others' configs: set by
``Workflow.run``, read by its Hydra sweeper plugin (in the same process, which may import
only ``_core`` and ``_slurm``).

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
    """Leave out ``reused`` (jobs' task overrides) for one launch; ``validate(config_loader,
    sweep_config, batch)`` checks a batch instead of Hydra, and returns what composes its jobs
    (``.master``, ``.load(job)``), or None for Hydra to check and compose them."""
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

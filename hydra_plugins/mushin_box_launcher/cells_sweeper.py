# SPDX-License-Identifier: MIT
"""Hydra's basic sweeper minus the jobs a resumed sweep reuses untouched.

``Workflow.run`` decides the completed cells before the launch
(:mod:`mushin_box._sweep.prefilter`) and names this class as ``hydra.sweeper._target_`` for
the jobs left; Hydra only instantiates plugins from the ``hydra_plugins`` package, hence
this module. The jobs are built and ordered exactly as the basic sweeper builds them.
"""

from __future__ import annotations

from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

__all__ = ["CellSweeper"]


class CellSweeper(BasicSweeper):
    """The basic sweeper, leaving out the jobs of ``mushin_box._core.jobskip.skipping``, with
    a cheaper check of each batch."""

    def split_arguments(  # type: ignore[override]  # an instance method: reads the skip set
        self, overrides: Any, max_batch_size: int | None
    ) -> list[list[list[str]]]:
        from mushin_box._core.jobskip import skipped_jobs

        skip = skipped_jobs()
        jobs = [
            job
            for job in BasicSweeper.split_arguments(overrides, None)[0]
            if tuple(job) not in skip
        ]
        if not jobs:
            return []
        if max_batch_size is None:
            return [jobs]
        return list(BasicSweeper.split_overrides_to_chunks(jobs, max_batch_size))

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Hydra composes every job twice, once here only to check it; a grid of plain
        values is checked by setting them over the first job's config instead (the same
        Hydra function, the same errors), else as Hydra does."""
        from mushin_box._core.jobskip import batch_validator

        quick = batch_validator()
        assert self.hydra_context is not None
        if quick is None or not quick(self.hydra_context.config_loader, self.config, batch):
            super().validate_batch_is_legal(batch)

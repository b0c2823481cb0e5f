# SPDX-License-Identifier: MIT
"""Hydra's basic sweeper minus the jobs a resumed sweep reuses untouched, each job composed
once, cheaply.

``Workflow.run`` decides the completed cells before the launch
(:mod:`mushin_box._sweep.prefilter`) and names this class as ``hydra.sweeper._target_`` for
the jobs left; Hydra only instantiates plugins from the ``hydra_plugins`` package, hence
this module. The jobs are built and ordered exactly as the basic sweeper builds them.

Hydra's basic sweeper composes every job twice: once to check it before the batch starts,
once in the launcher to run it. For a grid of plain values both are replaced by the first
job's config with each job's swept values set over it
(:func:`mushin_box._sweep.jobconfig.job_configs`, handed over by
``mushin_box._core.jobskip``): the check, with Hydra's own function, before any job runs;
the launcher's compose, for Hydra's basic launcher (which runs the jobs in this process),
through a config loader that asks it first. For that launcher, too, a job's return keeps
its outcome but not its copies of the configs (:class:`_LeanReturns`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from mushin_box._core.jobskip import batch_configs, skipped_jobs
from mushin_box._upstream.hydra import basic_sweeper, batches, runs_jobs_in_process, sweep_jobs

__all__ = ["CellSweeper"]


class _Loader:
    """Hydra's config loader, except that a job of the batch being launched comes from the
    sweeper's :class:`~mushin_box._sweep.jobconfig.JobConfigs`."""

    def __init__(self, loader: Any, sweeper: CellSweeper) -> None:
        self._loader = loader
        self._sweeper = sweeper

    def load_sweep_config(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        configs = self._sweeper.job_configs
        if configs is not None and master_config is configs.master:
            return configs.load(sweep_overrides)
        return self._loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _LeanReturns:
    """Hydra's callbacks, then the job's copies of its configs dropped from its
    ``JobReturn``: the basic launcher keeps every job's return until the last job ends,
    and those copies (~90 KB a job) held a 10,000-cell sweep's driver at ~1 GB. Nothing
    reads them: ``Workflow.run`` takes each cell's outcome from its files."""

    def __init__(self, callbacks: Any) -> None:
        self._callbacks = callbacks

    def on_job_end(self, *, config: Any, job_return: Any, **kwargs: Any) -> None:
        self._callbacks.on_job_end(config=config, job_return=job_return, **kwargs)
        job_return.cfg = job_return.hydra_cfg = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._callbacks, name)


class CellSweeper(basic_sweeper()):  # the class Hydra's plugin scan has just made
    """The basic sweeper, leaving out the jobs of ``mushin_box._core.jobskip.skipping``, with
    a cheaper check of each batch and, for the basic launcher, a cheaper compose of each job."""

    job_configs: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        if runs_jobs_in_process(self.launcher):  # it may use a _Loader
            quick = dataclasses.replace(
                hydra_context,
                config_loader=_Loader(hydra_context.config_loader, self),
                callbacks=_LeanReturns(hydra_context.callbacks),
            )
            self.launcher.setup(hydra_context=quick, task_function=task_function, config=config)

    def split_arguments(  # type: ignore[override]  # an instance method: reads the skip set
        self, overrides: Any, max_batch_size: int | None
    ) -> list[list[list[str]]]:

        skip = skipped_jobs()
        jobs = [job for job in sweep_jobs(overrides) if tuple(job) not in skip]
        if not jobs:
            return []
        if max_batch_size is None:
            return [jobs]
        return batches(jobs, max_batch_size)

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Check the batch by setting each job's values over the first job's config (the
        same Hydra function, the same errors), keeping that for the launcher; else as
        Hydra does."""

        quick = batch_configs()
        assert self.hydra_context is not None
        self.job_configs = None
        if quick is not None:
            self.job_configs = quick(self.hydra_context.config_loader, self.config, batch)
        if self.job_configs is None:
            super().validate_batch_is_legal(batch)

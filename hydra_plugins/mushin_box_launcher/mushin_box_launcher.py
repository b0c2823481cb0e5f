# SPDX-License-Identifier: MIT
"""Registers ``hydra/launcher=mushin_slurm`` and ``mushin_local``; thin Launcher adapters.

Everything else (validation, the sbatch script, waiting) is in :mod:`mushin_box._slurm.launcher`,
the host-side requeue trap in :mod:`mushin_box._slurm.requeue`. Importing this module imports
neither submitit nor torch.

Examples
--------
>>> from hydra import compose, initialize
>>> with initialize(version_base="1.3", config_path=None):
...     cfg = compose(overrides=["hydra/launcher=mushin_slurm", "hydra.launcher.nodes=2"],
...                   return_hydra_config=True)
>>> cfg.hydra.launcher.nodes, cfg.hydra.launcher.rank_signal
(2, 'USR1')
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from mushin_box._slurm.launcher import LocalLauncherConf, SlurmLauncherConf, SubmititCellLauncher

__all__ = ["MushinLocalLauncher", "MushinSlurmLauncher"]


class _MushinLauncher(Launcher):
    """Forwards to :class:`mushin_box._slurm.launcher.SubmititCellLauncher` (abstract: Hydra
    registers only the two concrete launchers below)."""

    @property
    @abstractmethod
    def cluster(self) -> Literal["slurm", "local"]: ...

    def __init__(self, **params: Any) -> None:
        self._launcher = SubmititCellLauncher(self.cluster, params)

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self._launcher.setup(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        return self._launcher.launch(job_overrides, initial_job_idx)


class MushinSlurmLauncher(_MushinLauncher):
    """``hydra/launcher=mushin_slurm``: each cell is a SLURM job."""

    @property
    def cluster(self) -> Literal["slurm", "local"]:
        return "slurm"


class MushinLocalLauncher(_MushinLauncher):
    """``hydra/launcher=mushin_local``: each cell runs as local processes."""

    @property
    def cluster(self) -> Literal["slurm", "local"]:
        return "local"


ConfigStore.instance().store(
    group="hydra/launcher", name="mushin_slurm", node=SlurmLauncherConf, provider="mushin_box"
)
ConfigStore.instance().store(
    group="hydra/launcher", name="mushin_local", node=LocalLauncherConf, provider="mushin_box"
)

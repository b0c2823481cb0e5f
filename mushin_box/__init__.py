# SPDX-License-Identifier: MIT
"""mushin-box: reproducible multi-node hydra-zen + PyTorch Lightning experiments.

Every public name is importable from here. Names that need torch or Lightning
(``HydraDDP``, ``MetricsCallback``) are loaded on first use, so ``import mushin_box``
and ``mushin-box --help`` stay fast.

Examples
--------
>>> import mushin_box
>>> mushin_box.seed_for_rank(1234, rank=1)
1235
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mushin_box._core.targets import STABLE
from mushin_box._core.version import __version__

# private module -> the public names it defines (imported lazily on attribute access; the
# errors, every one a MushinBoxError, among them)
_MODULES: dict[str, str] = {
    "mushin_box._train.pl": "HydraDDP MetricsCallback",
    "mushin_box._train.metrics": "load_metrics_file",
    "mushin_box._train.seeding": "seed_everything_per_rank seed_for_rank global_rank_from_env",
    "mushin_box._train.sampling": "WorldSizeInvariantSampler",
    "mushin_box._train.resume": "ResumeContext resume_context resumable "
    "find_last_checkpoint ShortenedFitError",
    "mushin_box._results.experiment": "load_experiment",
    "mushin_box._core.jobdir": "job_dir",
    "mushin_box._slurm.config": "submitit_slurm_config SubmititSlurmConfig",
    "mushin_box._sweep.workflow": "Workflow",
    "mushin_box._sweep.handle": "SweepHandle",
    "mushin_box._sweepdir.board": "SweepView CellView",
    "mushin_box._sweepdir.cancel": "CancelReport",
    "mushin_box._reproduce.rerun": "reproduce ReproduceResult",
    "mushin_box._image.spec": "ImageSpec ProjectInstall",
    "mushin_box._image.bases": "Debootstrap LocalImage",
    "mushin_box._image.definition": "render_definition",
    "mushin_box._image.build": "build_image Manifest read_manifest "
    "ApptainerNotFound OutputNotWritable",
    "mushin_box._image.sif": "read_sif_header SifHeader SifFormatError",
    "mushin_box._container.launchspec": "Bind ContainerLaunch ImageIdentity MasterPort NcclProfile",
    "mushin_box._container.rankwrap": "container_launcher_fields ContainerLauncherFields",
    "mushin_box._container.preflight": "PreflightError PreflightReport PreflightWarning preflight",
    "mushin_box._core.errors": "MushinBoxError CellWarning",
    "mushin_box._core.safeio": "UnsafeFileError",
    "mushin_box._train.world": "WorldSizeMismatchError",
    "mushin_box._image.dockerfile": "DockerfileError",
    "mushin_box._image.native": "BuildError NativeBuildRefused",
    "mushin_box._sweepdir.manifest": "SweepBusyError",
    "mushin_box._results.series": "MetricNameError SeriesFileError",
    "mushin_box._sweep.validate": "UnknownKeyError",
    "mushin_box._results.table": "ResultsError",
    "mushin_box._results.diff": "DiffInputError",
    "mushin_box._sweep.compose": "MissingValueError",
    "mushin_box._launch.plan": "LaunchError",
    "mushin_box._launch.loading": "LoadError",
    "mushin_box._launch.options": "OptionError",
    "mushin_box._launch.record": "RecordError",
    "mushin_box._launch.resume": "ResumeError",
    "mushin_box._launch.schedule": "ScheduleError",
    "mushin_box._reproduce.checks": "ReproduceError",
    "hydra_zen": "multirun hydra_list",
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names.split()}

__all__ = [
    "ApptainerNotFound",
    "Bind",
    "BuildError",
    "CellWarning",
    "NativeBuildRefused",
    "CancelReport",
    "CellView",
    "ContainerLaunch",
    "ContainerLauncherFields",
    "Debootstrap",
    "DiffInputError",
    "DockerfileError",
    "HydraDDP",
    "ImageIdentity",
    "ImageSpec",
    "LaunchError",
    "LoadError",
    "LocalImage",
    "Manifest",
    "MasterPort",
    "MetricNameError",
    "MetricsCallback",
    "MissingValueError",
    "MushinBoxError",
    "NcclProfile",
    "OptionError",
    "OutputNotWritable",
    "PreflightError",
    "PreflightReport",
    "PreflightWarning",
    "ProjectInstall",
    "RecordError",
    "ReproduceError",
    "ReproduceResult",
    "ResultsError",
    "ResumeContext",
    "ResumeError",
    "ScheduleError",
    "SeriesFileError",
    "ShortenedFitError",
    "SifFormatError",
    "SifHeader",
    "SubmititSlurmConfig",
    "SweepBusyError",
    "SweepHandle",
    "SweepView",
    "UnknownKeyError",
    "UnsafeFileError",
    "Workflow",
    "WorldSizeInvariantSampler",
    "WorldSizeMismatchError",
    "__version__",
    "build_image",
    "container_launcher_fields",
    "find_last_checkpoint",
    "global_rank_from_env",
    "hydra_list",
    "job_dir",
    "load_experiment",
    "load_metrics_file",
    "multirun",
    "preflight",
    "read_manifest",
    "read_sif_header",
    "render_definition",
    "reproduce",
    "resumable",
    "resume_context",
    "seed_everything_per_rank",
    "seed_for_rank",
    "submitit_slurm_config",
]

if TYPE_CHECKING:  # pragma: no cover - static names for type checkers and IDEs
    from hydra_zen import hydra_list, multirun

    from mushin_box._container.launchspec import (
        Bind,
        ContainerLaunch,
        ImageIdentity,
        MasterPort,
        NcclProfile,
    )
    from mushin_box._container.preflight import (
        PreflightError,
        PreflightReport,
        PreflightWarning,
        preflight,
    )
    from mushin_box._container.rankwrap import ContainerLauncherFields, container_launcher_fields
    from mushin_box._core.errors import CellWarning, MushinBoxError
    from mushin_box._core.jobdir import job_dir
    from mushin_box._core.safeio import UnsafeFileError
    from mushin_box._image.bases import Debootstrap, LocalImage
    from mushin_box._image.build import (
        ApptainerNotFound,
        Manifest,
        OutputNotWritable,
        build_image,
        read_manifest,
    )
    from mushin_box._image.definition import render_definition
    from mushin_box._image.dockerfile import DockerfileError
    from mushin_box._image.native import BuildError, NativeBuildRefused
    from mushin_box._image.sif import SifFormatError, SifHeader, read_sif_header
    from mushin_box._image.spec import ImageSpec, ProjectInstall
    from mushin_box._launch.loading import LoadError
    from mushin_box._launch.options import OptionError
    from mushin_box._launch.plan import LaunchError
    from mushin_box._launch.record import RecordError
    from mushin_box._launch.resume import ResumeError
    from mushin_box._launch.schedule import ScheduleError
    from mushin_box._reproduce.checks import ReproduceError
    from mushin_box._reproduce.rerun import ReproduceResult, reproduce
    from mushin_box._results.diff import DiffInputError
    from mushin_box._results.experiment import load_experiment
    from mushin_box._results.series import MetricNameError, SeriesFileError
    from mushin_box._results.table import ResultsError
    from mushin_box._slurm.config import SubmititSlurmConfig, submitit_slurm_config
    from mushin_box._sweep.compose import MissingValueError
    from mushin_box._sweep.handle import SweepHandle
    from mushin_box._sweep.validate import UnknownKeyError
    from mushin_box._sweep.workflow import Workflow
    from mushin_box._sweepdir.board import CellView, SweepView
    from mushin_box._sweepdir.cancel import CancelReport
    from mushin_box._sweepdir.manifest import SweepBusyError
    from mushin_box._train.metrics import load_metrics_file
    from mushin_box._train.pl import HydraDDP, MetricsCallback
    from mushin_box._train.resume import (
        ResumeContext,
        ShortenedFitError,
        find_last_checkpoint,
        resumable,
        resume_context,
    )
    from mushin_box._train.sampling import WorldSizeInvariantSampler
    from mushin_box._train.seeding import (
        global_rank_from_env,
        seed_everything_per_rank,
        seed_for_rank,
    )
    from mushin_box._train.world import WorldSizeMismatchError


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name) or STABLE.get(name)  # STABLE: recorded names, not API
    if module is None:
        raise AttributeError(f"module 'mushin_box' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

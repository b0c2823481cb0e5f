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

__version__ = "0.1.0"

# public name -> private module that defines it (imported lazily on attribute access)
_LAZY: dict[str, str] = {
    "HydraDDP": "mushin_box._ddp",
    "MetricsCallback": "mushin_box._metrics",
    "load_metrics_file": "mushin_box._metrics",
    "seed_everything_per_rank": "mushin_box._seeding",
    "seed_for_rank": "mushin_box._seeding",
    "global_rank_from_env": "mushin_box._seeding",
    "ResumeContext": "mushin_box._resume",
    "resume_context": "mushin_box._resume",
    "resumable": "mushin_box._resume",
    "find_last_checkpoint": "mushin_box._resume",
    "load_experiment": "mushin_box._experiment",
    "job_dir": "mushin_box._jobdir",
    "submitit_slurm_config": "mushin_box._slurm",
    "Workflow": "mushin_box._workflow",
    "ImageSpec": "mushin_box._imagespec",
    "ProjectInstall": "mushin_box._imagespec",
    "render_definition": "mushin_box._imagespec",
    "build_image": "mushin_box._build",
    "Manifest": "mushin_box._build",
    "read_manifest": "mushin_box._build",
    "ApptainerNotFound": "mushin_box._build",
    "read_sif_header": "mushin_box._sif",
    "SifHeader": "mushin_box._sif",
    "multirun": "mushin_box._workflow",
    "hydra_list": "mushin_box._workflow",
}

__all__ = [
    "ApptainerNotFound",
    "HydraDDP",
    "ImageSpec",
    "Manifest",
    "MetricsCallback",
    "ProjectInstall",
    "ResumeContext",
    "SifHeader",
    "Workflow",
    "__version__",
    "build_image",
    "find_last_checkpoint",
    "global_rank_from_env",
    "hydra_list",
    "job_dir",
    "load_experiment",
    "load_metrics_file",
    "multirun",
    "read_manifest",
    "read_sif_header",
    "render_definition",
    "resumable",
    "resume_context",
    "seed_everything_per_rank",
    "seed_for_rank",
    "submitit_slurm_config",
]

if TYPE_CHECKING:  # pragma: no cover - static names for type checkers and IDEs
    from mushin_box._build import ApptainerNotFound, Manifest, build_image, read_manifest
    from mushin_box._ddp import HydraDDP
    from mushin_box._experiment import load_experiment
    from mushin_box._imagespec import ImageSpec, ProjectInstall, render_definition
    from mushin_box._jobdir import job_dir
    from mushin_box._metrics import MetricsCallback, load_metrics_file
    from mushin_box._resume import (
        ResumeContext,
        find_last_checkpoint,
        resumable,
        resume_context,
    )
    from mushin_box._seeding import (
        global_rank_from_env,
        seed_everything_per_rank,
        seed_for_rank,
    )
    from mushin_box._sif import SifHeader, read_sif_header
    from mushin_box._slurm import submitit_slurm_config
    from mushin_box._workflow import Workflow, hydra_list, multirun


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mushin_box' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

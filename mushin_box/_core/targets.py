# SPDX-License-Identifier: MIT
"""Stable config targets: public names say ``mushin_box.X``, and 0.1's paths still load.

hydra-zen writes ``builds(HydraDDP)`` as ``_target_: <module>.<name>`` of the class, into
every saved config, cell fingerprint and provenance record. A private module path there
would tie every saved experiment to where the code happened to live, so each public name
declares itself as part of ``mushin_box`` (:func:`public`) and configs say
``mushin_box.HydraDDP``, which survives any later move.

Configs saved by mushin-box 0.1 name the old private modules (``mushin_box._ddp.HydraDDP``,
``mushin_box._metrics.MetricsCallback``...). :class:`LegacyTargets` keeps exactly those
*public* names resolvable at their old paths, so such a config still instantiates and a
saved sweep can be re-run. It is not an import shim: a private name at an old path, or
any old path not in :data:`LEGACY_TARGETS`, does not resolve.

Examples
--------
>>> import mushin_box
>>> from hydra.utils import get_class
>>> get_class("mushin_box._ddp.HydraDDP") is mushin_box.HydraDDP  # doctest: +SKIP
True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, TypeVar

__all__ = ["FIRST_NAMES", "LEGACY_TARGETS", "PUBLIC_MODULE", "STABLE", "LegacyTargets", "public"]

PUBLIC_MODULE = "mushin_box"
#: mushin-box 0.1's module of each public name (its ``_target_`` path in saved configs).
#: ``submitit_slurm_config`` (0.1: ``mushin_box._slurm``) is absent: that path is now the
#: SLURM room, and the function builds launcher settings at submit time, never a target.
LEGACY_TARGETS: dict[str, tuple[str, ...]] = {
    "mushin_box._build": ("ApptainerNotFound", "Manifest", "build_image", "read_manifest"),
    "mushin_box._ddp": ("HydraDDP",),
    "mushin_box._experiment": ("load_experiment",),
    "mushin_box._imagespec": ("ImageSpec", "ProjectInstall", "render_definition"),
    "mushin_box._jobdir": ("job_dir",),
    "mushin_box._metrics": ("MetricsCallback", "load_metrics_file"),
    "mushin_box._resume": ("ResumeContext", "find_last_checkpoint", "resumable", "resume_context"),
    "mushin_box._seeding": ("global_rank_from_env", "seed_everything_per_rank", "seed_for_rank"),
    "mushin_box._sif": ("SifHeader", "read_sif_header"),
    "mushin_box._workflow": ("Workflow", "hydra_list", "multirun"),
    # not 0.1, but the same kind of path: recorded in every config-only cell's run.task
    # and pickled in its jobs, before these two got their stable names (Rooms II)
    "mushin_box._sweep.launch": ("fit_task", "seed_pre_call"),
}

#: names that ``mushin_box`` resolves without listing them in ``__all__``: not API, but
#: stable (recorded by name and pickled) -> the module that defines each
STABLE: dict[str, str] = {
    "fit_task": "mushin_box._train.configtask",
    "seed_pre_call": "mushin_box._train.configtask",
}

#: a stable name -> the name a code fingerprint hashes for it: the one it was first
#: recorded under, so that giving it a stable name re-runs no finished cell
FIRST_NAMES: dict[str, str] = {
    "mushin_box.fit_task": "mushin_box._sweep.launch.fit_task",
    "mushin_box.seed_pre_call": "mushin_box._sweep.launch.seed_pre_call",
}

T = TypeVar("T")


def public(obj: T) -> T:
    """Declare ``obj`` part of ``mushin_box``: its ``__module__`` becomes ``mushin_box``."""
    obj.__module__ = PUBLIC_MODULE  # pyright: ignore[reportAttributeAccessIssue]
    return obj


class _LegacyModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name in LEGACY_TARGETS[self.__name__]:
            return getattr(importlib.import_module(PUBLIC_MODULE), name)
        names = ", ".join(LEGACY_TARGETS[self.__name__])
        raise AttributeError(
            f"{self.__name__} is mushin-box 0.1's path of {names} only; "
            f"import {name!r} from mushin_box"
        )


class LegacyTargets(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves the module paths of :data:`LEGACY_TARGETS` (installed by ``mushin_box``)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in LEGACY_TARGETS:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _LegacyModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None

    @classmethod
    def install(cls) -> None:
        """Add the finder to ``sys.meta_path`` once (after the standard finders)."""
        if not any(isinstance(f, cls) for f in sys.meta_path):
            sys.meta_path.append(cls())

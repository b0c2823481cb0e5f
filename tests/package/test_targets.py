# SPDX-License-Identifier: MIT
"""Saved configs name stable targets, and configs saved by mushin-box 0.1 still load."""

from __future__ import annotations

import pytest
from hydra_zen import builds, instantiate
from omegaconf import OmegaConf

import mushin_box
from mushin_box._core.targets import LEGACY_TARGETS

# a trainer section as mushin-box 0.1 saved it in .hydra/config.yaml (examples/sweep.py)
SAVED_BY_0_1 = """
trainer:
  _target_: pytorch_lightning.trainer.trainer.Trainer
  accelerator: cpu
  devices: 1
  max_epochs: 1
  strategy:
    _target_: mushin_box._ddp.HydraDDP
  callbacks:
  - _target_: mushin_box._metrics.MetricsCallback
  logger: false
  enable_progress_bar: false
  enable_model_summary: false
module:
  _target_: mushin_box.testing.TinyModule
  lr: 0.05
seed_fn:
  _target_: mushin_box._seeding.seed_for_rank
  _partial_: true
"""

PUBLIC = sorted(set(mushin_box.__all__) - {"__version__", "multirun", "hydra_list"})


@pytest.mark.parametrize("name", PUBLIC)
def test_public_names_are_targeted_as_mushin_box(name: str) -> None:
    obj = getattr(mushin_box, name)
    assert obj.__module__ == "mushin_box"
    if isinstance(obj, type) and name not in {"ApptainerNotFound"}:
        assert builds(obj, populate_full_signature=False)._target_ == f"mushin_box.{name}"


def test_a_config_saved_by_0_1_still_instantiates(tmp_path) -> None:
    cfg = OmegaConf.create(SAVED_BY_0_1)
    out = instantiate(cfg)
    assert isinstance(out.trainer.strategy, mushin_box.HydraDDP)
    assert isinstance(out.trainer.callbacks[0], mushin_box.MetricsCallback)
    assert type(out.module).__name__ == "TinyModule" and out.module.hparams.lr == 0.05
    assert out.seed_fn(7, rank=2) == 9


def test_every_public_name_of_0_1_keeps_its_old_path() -> None:
    # mushin-box 0.1's __all__ (minus __version__): each name at its old module path
    covered = {name for names in LEGACY_TARGETS.values() for name in names}
    # mushin_box._slurm is now the SLURM room; submitit_slurm_config is never a _target_;
    # names public since 0.1 had no 0.1 path (a new public name is added here on purpose)
    since_0_1 = {"WorldSizeInvariantSampler", "SweepHandle", "reproduce", "ReproduceResult"}
    since_0_1 |= {  # the container API, public since 0.2 (users call it directly)
        "Bind",
        "ContainerLaunch",
        "ImageIdentity",
        "MasterPort",
        "NcclProfile",
        "PreflightError",
        "PreflightReport",
        "PreflightWarning",
        "container_launcher_fields",
        "preflight",
    }
    since_0_1 |= {"Debootstrap", "LocalImage"}  # the bases that need no registry, 0.3
    expected = set(mushin_box.__all__) - {"__version__", "submitit_slurm_config"} - since_0_1
    # and the kit's own tasks, recorded by name (STABLE, not API) at their pre-0.3 path
    expected |= {"fit_task", "seed_pre_call"}
    assert covered == expected
    for module, names in LEGACY_TARGETS.items():
        for name in names:
            old = __import__(module, fromlist=[name])
            assert getattr(old, name) is getattr(mushin_box, name), f"{module}.{name}"


def test_old_paths_resolve_public_names_only() -> None:
    import mushin_box._ddp as old  # type: ignore[import-not-found]

    with pytest.raises(AttributeError, match="import '_DIST_ENV' from mushin_box"):
        old._DIST_ENV  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        __import__("mushin_box._cells")  # a 0.1 module that held no public name

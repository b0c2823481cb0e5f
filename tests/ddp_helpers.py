# SPDX-License-Identifier: MIT
"""Configs and tasks shared by the HydraDDP tests (rank 0 runs the task in-process)."""

from __future__ import annotations

import importlib
import os
import time

import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import ResumeContext, seed_everything_per_rank
from mushin_box.testing import TinyDataModule, TinyModule

#: a Lightning namespace (its Trainer's package) -> the kit's module of classes for it
KITS = {"pytorch_lightning": "mushin_box", "lightning.pytorch": "mushin_box.lightning"}
#: ... and of the tiny example model and data
TINY = {"pytorch_lightning": "mushin_box.testing", "lightning.pytorch": "mushin_box.lightning"}


def trainer_conf(
    devices: int = 2, max_epochs: int = 2, lightning: str = "pytorch_lightning", **kw: object
) -> object:
    trainers, kit = importlib.import_module(lightning), importlib.import_module(KITS[lightning])
    return builds(
        trainers.Trainer,
        accelerator="cpu",
        devices=devices,
        num_nodes=1,
        max_epochs=max_epochs,
        strategy=builds(kit.HydraDDP, child_exit_timeout_s=60.0),
        callbacks=[
            builds(kit.MetricsCallback),
            builds(
                trainers.callbacks.ModelCheckpoint,
                dirpath="${hydra:runtime.output_dir}/checkpoints",
                save_last=True,
            ),
        ],
        default_root_dir="${hydra:runtime.output_dir}",
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        **kw,
    )


def make_app_config(
    devices: int = 2, max_epochs: int = 2, seed: int = 1234, lightning: str = "pytorch_lightning"
) -> object:
    tiny = importlib.import_module(TINY[lightning])
    return make_config(
        seed=seed,
        stage="fit",
        trainer=trainer_conf(devices=devices, max_epochs=max_epochs, lightning=lightning),
        module=builds(tiny.TinyModule),
        datamodule=builds(tiny.TinyDataModule),
    )


def fit_task(
    seed: int,
    stage: str,
    trainer: pl.Trainer,
    module: TinyModule,
    datamodule: TinyDataModule,
    mushin_resume: ResumeContext,
) -> dict[str, object]:
    got = seed_everything_per_rank(seed)
    if stage == "fit":
        trainer.fit(module, datamodule=datamodule, ckpt_path=mushin_resume.last_ckpt)
    else:
        getattr(trainer, stage)(module, datamodule=datamodule)
    return {"seed": got, "world_size": trainer.world_size, "attempt": mushin_resume.attempt}


class SlowChildDataModule(TinyDataModule):
    """Slow to build in the ranks HydraDDP starts (e.g. a download): rank 0 waits for them."""

    def __init__(self, child_sleep_s: float = 0.0) -> None:
        super().__init__()
        if os.environ.get("MUSHIN_DDP_PARENT_PID"):
            time.sleep(child_sleep_s)

# SPDX-License-Identifier: MIT
"""The README's main job: a 2-cell learning-rate sweep, each cell a 2-rank HydraDDP fit.

    python examples/sweep.py [WORKING_DIR]

Every cell gets a stable directory named after its swept values, with atomic sidecars:
mushin_status.json, mushin_metrics.json, mushin_provenance.json, plus rank 0's
fit_metrics.pt. Run it again and completed cells are reused (resume=True).
"""

from __future__ import annotations

import sys

import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import (
    HydraDDP,
    MetricsCallback,
    ResumeContext,
    Workflow,
    multirun,
    seed_everything_per_rank,
)
from mushin_box.testing import TinyDataModule, TinyModule

Config = make_config(
    seed=1234,
    trainer=builds(
        pl.Trainer,
        accelerator="cpu",
        devices=2,  # two ranks per cell; HydraDDP starts rank 1
        num_nodes=1,
        max_epochs=3,
        strategy=builds(HydraDDP),
        callbacks=[
            builds(MetricsCallback),
            builds(
                pl.callbacks.ModelCheckpoint,
                dirpath="${hydra:runtime.output_dir}/ckpt",
                save_last=True,
            ),
        ],
        default_root_dir="${hydra:runtime.output_dir}",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    ),
    module=builds(TinyModule, lr=0.05),
    datamodule=builds(TinyDataModule),
)


def seed_ranks(cfg: object) -> None:
    # before zen instantiates the module: its initial weights are then reproducible
    seed_everything_per_rank(cfg.seed)  # type: ignore[attr-defined]


def train(
    seed: int,
    trainer: pl.Trainer,
    module: TinyModule,
    datamodule: TinyDataModule,
    mushin_resume: ResumeContext,
) -> dict[str, float]:
    trainer.fit(module, datamodule=datamodule, ckpt_path=mushin_resume.last_ckpt)
    # not trainer.callback_metrics: a fit resumed at max_epochs (killed after it finished)
    # trains nothing and logs nothing; MetricsCallback restored its last values
    return {"val_loss": MetricsCallback.final_metrics(trainer)["val_loss"]}


if __name__ == "__main__":
    working_dir = sys.argv[1] if len(sys.argv) > 1 else "outputs/example-sweep"
    ds = Workflow(train, Config, pre_call=seed_ranks).run(
        working_dir=working_dir,
        resume=True,
        **{"module.lr": multirun([0.01, 0.1])},
    )
    print(ds)
    print(f"\n[mushin-box example] sweep in {ds.attrs['working_dir']}")
    for lr in ds["module.lr"].values:
        cell = ds["cell_dir"].sel({"module.lr": lr}).item()
        loss = ds["val_loss"].sel({"module.lr": lr}).item()
        print(f"[mushin-box example]   lr={lr}: final val_loss {loss:.4f} -> {cell}/")

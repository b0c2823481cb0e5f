# SPDX-License-Identifier: MIT
"""The README's main job: a tiny hydra-zen + Lightning fit on 2 CPU ranks under HydraDDP.

    python examples/fit.py                      # one job, 2 ranks
    python examples/fit.py trainer.max_epochs=5 # any Hydra override
    python examples/fit.py -m seed=1,2          # a Hydra multirun: 2 jobs x 2 ranks

Rank 0 is this Hydra job; HydraDDP starts rank 1 from the job's saved config. Rank 0
alone writes fit_metrics.pt / test_metrics.pt into the job directory.
"""

from __future__ import annotations

import pytorch_lightning as pl
from hydra.core.hydra_config import HydraConfig
from hydra_zen import builds, make_config, store

from mushin_box import (
    HydraDDP,
    MetricsCallback,
    ResumeContext,
    load_experiment,
    seed_everything_per_rank,
)
from mushin_box.testing import TinyDataModule, TinyModule

Config = make_config(
    seed=1234,
    trainer=builds(
        pl.Trainer,
        accelerator="cpu",
        devices=2,
        num_nodes=1,
        max_epochs=3,
        strategy=builds(HydraDDP),
        callbacks=[builds(MetricsCallback)],
        default_root_dir="${hydra:runtime.output_dir}",
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
    ),
    module=builds(TinyModule),
    datamodule=builds(TinyDataModule),
)


def seed_ranks(cfg: object) -> None:
    # zen's pre_call: runs before the module is instantiated, so its initial weights are
    # reproducible (rank r gets seed + r; HydraDDP's other ranks seed from the same base)
    seed_everything_per_rank(cfg.seed)  # type: ignore[attr-defined]


def task(
    trainer: pl.Trainer,
    module: TinyModule,
    datamodule: TinyDataModule,
    mushin_resume: ResumeContext,
) -> None:
    trainer.fit(module, datamodule=datamodule, ckpt_path=mushin_resume.last_ckpt)
    trainer.test(module, datamodule=datamodule)
    if trainer.is_global_zero:
        out = HydraConfig.get().runtime.output_dir
        ds = load_experiment(out)
        print(f"[mushin-box example] world size {trainer.world_size}; metrics in {out}")
        print(f"[mushin-box example]   fit_metrics.pt: epochs {ds['epoch'].values.tolist()}")
        print(f"[mushin-box example]   val_loss {ds['fit.val_loss'].values.round(4).tolist()}")
        print(f"[mushin-box example]   test_loss {ds['test.test_loss'].values.round(4).tolist()}")


if __name__ == "__main__":
    from mushin_box import resumable

    store(Config, name="example_fit")
    store.add_to_hydra_store()
    # resumable = hydra_zen.zen that also fills `mushin_resume`
    resumable(task, pre_call=seed_ranks).hydra_main(
        config_name="example_fit", config_path=None, version_base="1.3"
    )

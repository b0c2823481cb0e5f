# SPDX-License-Identifier: MIT
"""An experiment for ``mushin-box launch``: a hydra-zen config, nothing else.

    mushin-box launch examples/exp.py --gpus 2 module.lr=0.01,0.1           # here: 2 CPU ranks
    mushin-box launch examples/exp.py --nodes 2 --gpus 4 --partition gpu \\
        --image mushin-box.sif trainer.accelerator=gpu                     # SLURM: 8 ranks

``launch`` sets ``trainer.devices``/``trainer.num_nodes`` from ``--gpus``/``--nodes`` (one
rank per GPU), fits every cell with ``mushin_box.fit_task`` (resuming from the
cell's ``last.ckpt``), and seeds each rank with ``seed + global_rank`` before the model is
built. Keep the ``MetricsCallback``: a cell resumed after its fit had finished trains
nothing, and reports the metrics its checkpoint restored into the callback.
"""

from __future__ import annotations

import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import HydraDDP, MetricsCallback
from mushin_box.testing import TinyDataModule, TinyModule

Config = make_config(
    seed=1234,
    trainer=builds(
        pl.Trainer,
        accelerator="cpu",
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
    # the same global batches at any world size: 1 rank and 8 ranks fit the same model
    datamodule=builds(TinyDataModule, global_batch_size=16),
)

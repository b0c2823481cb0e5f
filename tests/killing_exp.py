# SPDX-License-Identifier: MIT
"""The example experiment plus a callback that kills rank 1 (SIGKILL) when its epoch 2
starts, after epoch 1's ``last.ckpt`` was saved: the text of an experiment file, for the
tests of torchrun's restarts and of a resume at another world size.

``experiment(name)`` is the same config with another callback class, for experiments that
kill otherwise (tests/slurm/test_torchrun_scale_down.py). Armed by the environment of the
launch: ``KILL_AT_2=1`` kills at every attempt;
``KILL_ONCE=<marker file>`` kills once (the marker says it happened).
"""

KILLING_EXP = """
import os
import signal

import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import HydraDDP, MetricsCallback
from mushin_box.testing import TinyDataModule, TinyModule


class KillRank1AtEpoch2(pl.Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch != 2 or trainer.global_rank != 1:
            return
        marker = os.environ.get("KILL_ONCE")
        if marker and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        if os.environ.get("KILL_AT_2"):
            os.kill(os.getpid(), signal.SIGKILL)
"""


def experiment(callback: str) -> str:
    """The example experiment with the callback class ``callback`` (defined in the text
    before it) among the Trainer's callbacks, after epoch 1's ``last.ckpt`` is saved."""
    return CONFIG.replace("CALLBACK", callback)


CONFIG = """

Config = make_config(
    seed=1234,
    trainer=builds(
        pl.Trainer,
        accelerator="cpu",
        max_epochs=4,
        strategy=builds(HydraDDP),
        callbacks=[
            builds(MetricsCallback),
            builds(CALLBACK),
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
    datamodule=builds(TinyDataModule, global_batch_size=16),
)
"""

KILLING_EXP = KILLING_EXP + experiment("KillRank1AtEpoch2")

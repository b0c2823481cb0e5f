# SPDX-License-Identifier: MIT
"""Tiny Lightning module and data for examples, tests and smoke runs (CPU, seconds),
importable by every rank; free of Lightning (:mod:`.pl`, :mod:`.lp`), with the doors
:mod:`mushin_box.testing` and :mod:`mushin_box.lightning`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from mushin_box._core.jobdir import job_dir
from mushin_box._core.layout import TEST_FAIL_RANK_ENV, TEST_RANK_LOG_ENV
from mushin_box._train.sampling import WorldSizeInvariantSampler

# the Lightning classes the mixins go into, of either namespace (see .pl and .lp)
LightningModule: Any = object
LightningDataModule: Any = object


class TinyModuleMixin(LightningModule):
    """A linear regressor that logs ``train_loss``, ``val_loss`` and ``test_loss``.

    Tests steer it through ``MUSHIN_TEST_*`` variables: one rank failing alone, and each
    rank recording its seed and world per epoch, so that they can check every rank's part.
    """

    def __init__(
        self,
        in_features: int = 8,
        lr: float = 0.05,
        fail_at_epoch: int | None = None,
        epoch_sleep_s: float = 0.0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(in_features, 1)
        self.fail_at_epoch = fail_at_epoch
        self.epoch_sleep_s = epoch_sleep_s  # slow epochs: time for tests to kill a fit midway

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def _loss(self, batch: Any) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.fail_at_epoch is not None and self.current_epoch >= self.fail_at_epoch:
            raise RuntimeError(f"TinyModule: planned failure at epoch {self.current_epoch}")
        # tests make one rank fail alone: MUSHIN_TEST_FAIL_RANK=<global rank>
        if os.environ.get(TEST_FAIL_RANK_ENV) == str(self.global_rank) and batch_idx == 1:
            raise RuntimeError(f"TinyModule: planned failure of rank {self.global_rank}")
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def on_train_epoch_start(self) -> None:
        # with MUSHIN_TEST_RANK_LOG set to a directory, each rank appends what it did there
        target = os.environ.get(TEST_RANK_LOG_ENV)
        if not target:
            return
        with open(os.path.join(target, f"rank{self.global_rank}.log"), "a", encoding="utf-8") as f:
            f.write(
                f"epoch={self.current_epoch} seed={os.environ.get('PL_GLOBAL_SEED', '')} "
                f"world={self.trainer.world_size} pid={os.getpid()} "
                f"job={job_dir().name.replace(' ', '_')}\n"
            )

    def on_train_epoch_end(self) -> None:
        if self.epoch_sleep_s:
            time.sleep(self.epoch_sleep_s)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch), sync_dist=True)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test_loss", self._loss(batch), sync_dist=True)

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


class TinyDataModuleMixin(LightningDataModule):
    """Deterministic random regression data (a fixed generator seed, not the global RNG).

    With ``global_batch_size`` set, training batches come from a shuffled
    :class:`~mushin_box.WorldSizeInvariantSampler` (``batch_size`` is then unused for
    training): the same global batches at any world size.
    """

    def __init__(
        self,
        n: int = 64,
        in_features: int = 8,
        batch_size: int = 16,
        global_batch_size: int | None = None,
    ):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(n, in_features, generator=gen)
        w = torch.randn(in_features, 1, generator=gen)
        self.data = TensorDataset(x, x @ w + 0.1 * torch.randn(n, 1, generator=gen))
        self.batch_size = batch_size
        self.global_batch_size = global_batch_size

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.data, batch_size=self.batch_size)

    test_dataloader = predict_dataloader = val_dataloader

    def train_dataloader(self) -> DataLoader[Any]:
        if self.global_batch_size is None:
            return self.val_dataloader()
        trainer = self.trainer
        assert trainer is not None, "train_dataloader() is called by a Trainer"
        sampler = WorldSizeInvariantSampler(
            self.data,
            self.global_batch_size,
            num_replicas=trainer.world_size,
            rank=trainer.global_rank,
        )
        return DataLoader(self.data, batch_size=sampler.local_batch_size, sampler=sampler)

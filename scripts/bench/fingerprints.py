#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""The cost of the first-divergence fingerprints in a real fit of a 100M-parameter model.

    python scripts/bench/fingerprints.py STEPS REPEAT

A Lightning fit (CPU, one process) of a 6-layer 4096-wide MLP (100.7M parameters, SGD,
batch 8) with ``MetricsCallback(fingerprints=True)``, ``STEPS`` training steps per repeat.
The fingerprint functions the callback calls are wrapped with timers, and a callback times
each step, so both sides come from the same fit:

- ``fingerprint``: seconds the fingerprints take per epoch (the weights at each epoch's
  end and the epoch's first batch; the fit-start weights are paid once per fit and are
  counted too, as if every fit were one epoch long: the worst case);
- ``epoch``: an epoch of :data:`EPOCH_STEPS` steps at the fit's median step time. The fit
  runs fewer steps than that (a CPU step of this model takes ~0.3 s); the step time is
  what is measured, the epoch length is the benchmark's definition (8,000 samples: a small
  dataset).

Prints one JSON object: ``{"fingerprint": [...], "epoch": [...], "params": N,
"epoch_steps": EPOCH_STEPS}``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

import mushin_box._train.divergence as divergence
from mushin_box import MetricsCallback

WIDTH, LAYERS, BATCH = 4096, 6, 8
EPOCH_STEPS = 1000


class Big(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        (x,) = batch
        loss = self.net(x).pow(2).mean()
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=1e-4)


class StepTimer(pl.Callback):
    def __init__(self) -> None:
        self.steps: list[float] = []
        self._t0 = 0.0

    def on_train_batch_start(self, *args: Any) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, *args: Any) -> None:
        self.steps.append(time.perf_counter() - self._t0)


def timed(fn: Any, spent: list[float]) -> Any:
    def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent.append(time.perf_counter() - t0)

    return wrapper


def one_fit(steps: int) -> tuple[float, float, int]:
    """(fingerprint seconds, median step seconds excluding batch 0's hook, parameters)."""
    spent: list[float] = []
    weights, batch = divergence.weights_fingerprint, divergence.batch_fingerprint
    divergence.weights_fingerprint = timed(weights, spent)
    divergence.batch_fingerprint = timed(batch, spent)
    try:
        timer = StepTimer()
        data = TensorDataset(torch.randn(steps * BATCH, WIDTH))
        with tempfile.TemporaryDirectory() as out:
            trainer = pl.Trainer(
                accelerator="cpu", devices=1, max_epochs=1, logger=False,
                enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, default_root_dir=out,
                callbacks=[MetricsCallback(save_dir=out, fingerprints=True), timer],
            )  # fmt: skip
            module = Big()
            trainer.fit(module, DataLoader(data, batch_size=BATCH))
        params = sum(p.numel() for p in module.parameters())
    finally:
        divergence.weights_fingerprint, divergence.batch_fingerprint = weights, batch
    # the first step warms up (allocations); the hooks run outside the timed steps
    return sum(spent), statistics.median(timer.steps[1:]), params


def main() -> None:
    steps, repeat = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    prints, epochs, params = [], [], 0
    for _ in range(repeat):
        spent, step, params = one_fit(steps)
        prints.append(spent)
        epochs.append(step * EPOCH_STEPS)
    print(json.dumps(
        {"fingerprint": prints, "epoch": epochs, "params": params, "epoch_steps": EPOCH_STEPS}
    ))  # fmt: skip


if __name__ == "__main__":
    main()

#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""A 2-rank CPU (gloo) fit of a tiny model, timed on rank 0: ``ddp_fit.py TOOL EPOCHS``.

``TOOL`` is how the second rank is started:

- ``lightning``: ``Trainer(strategy="ddp")``, Lightning re-running this script;
- ``box``: ``hydra_zen.launch`` of one job whose trainer uses ``mushin_box.HydraDDP``;
- ``mpy``: the same job with mushin-py's ``HydraDDP`` (run with the benchmark venv's Python).

The model and its data are defined here, so that the three fit the same thing in the same
way whichever project is installed (``mushin_box.testing.TinyModule``'s linear regressor,
without its test hooks). Imports happen before the clock; the clock covers what a user
waits for: the trainer built, rank 1 started (its own imports included), the process
group, the epochs, and the ranks ended. Rank 0 prints ``{"fit": [seconds]}`` last.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

HERE = str(Path(__file__).resolve().parent)


class TinyRegressor(pl.LightningModule):
    """A linear regressor (as ``mushin_box.testing.TinyModule``)."""

    def __init__(self, in_features: int = 8, lr: float = 0.05) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(in_features, 1)
        self.lr = lr

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class TinyData(pl.LightningDataModule):
    """Fixed random regression data (a seeded generator), as ``TinyDataModule``."""

    def __init__(self, n: int = 256, in_features: int = 8, batch_size: int = 16) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(n, in_features, generator=gen)
        w = torch.randn(in_features, 1, generator=gen)
        self.data = TensorDataset(x, x @ w + 0.1 * torch.randn(n, 1, generator=gen))
        self.batch_size = batch_size

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.data, batch_size=self.batch_size)


TRAINER: dict[str, Any] = dict(
    accelerator="cpu",
    devices=2,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)


def _lightning(epochs: int) -> None:
    trainer = pl.Trainer(max_epochs=epochs, strategy="ddp", **TRAINER)
    trainer.fit(TinyRegressor(), datamodule=TinyData())


def _fit(trainer: Any, module: Any, datamodule: Any) -> None:
    trainer.fit(module, datamodule=datamodule)


def _hydra(tool: str, epochs: int, job: Path) -> None:
    from hydra_zen import builds, launch, make_config

    config = make_config(
        trainer=builds(pl.Trainer, max_epochs=epochs, strategy=builds(_strategy(tool)), **TRAINER),
        module=builds(TinyRegressor),
        datamodule=builds(TinyData),
    )
    launch(config, _fit_task(), overrides=[f"hydra.run.dir={job}"], version_base="1.3")


def _strategy(tool: str) -> Any:
    """The tool's HydraDDP class."""
    if tool == "box":
        from mushin_box import HydraDDP
    else:
        from mushin import HydraDDP  # pyright: ignore[reportMissingImports]
    return HydraDDP


def _fit_task() -> Any:
    from hydra_zen import zen

    return zen(_fit)


def main() -> None:
    tool, epochs = sys.argv[1], int(sys.argv[2])
    # the ranks started from a saved config import this module by name
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (HERE, os.environ.get("PYTHONPATH", "")) if p
    )
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    rank0 = not os.environ.get("LOCAL_RANK")  # Lightning re-runs this script for rank 1
    if tool != "lightning":  # imported before the clock, as Lightning is (HydraDDP's own)
        import hydra_zen  # noqa: F401

        _strategy(tool)
    with tempfile.TemporaryDirectory(prefix="mushin-bench-ddp-") as tmp:
        t0 = time.perf_counter()
        if tool == "lightning":
            _lightning(epochs)
        else:
            # the ranks' Hydra configs name this module, not __main__
            import ddp_fit  # type: ignore[import-not-found]  # noqa: PLW0406

            ddp_fit._hydra(tool, epochs, Path(tmp) / "job")
        seconds = time.perf_counter() - t0
    if rank0:
        print(json.dumps({"fit": [seconds]}), flush=True)


if __name__ == "__main__":
    main()

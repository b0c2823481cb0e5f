# SPDX-License-Identifier: MIT
"""MetricsCallback reserves its index keys: a metric logged as ``epoch`` (or ``round``) is
kept under ``epoch_logged`` (``round_logged``) instead of overwriting the index."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
from workflow_tasks import quiet_trainer

from mushin_box import MetricsCallback, load_experiment, load_metrics_file
from mushin_box.testing import TinyDataModule, TinyModule


class _LogsEpoch(TinyModule):
    """Logs a metric named ``epoch`` (as users of loggers do) in validation and test."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        self.log("epoch", float(10 * self.current_epoch + 7))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        super().test_step(batch, batch_idx)
        self.log("round", 5.0)


def _trainer(tmp_path: Path) -> pl.Trainer:
    return quiet_trainer(
        3, callbacks=[MetricsCallback(save_dir=tmp_path)], enable_checkpointing=False
    )


def test_a_metric_logged_as_epoch_keeps_the_epoch_index(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    with pytest.warns(UserWarning, match="'epoch' is reserved") as record:
        trainer.fit(_LogsEpoch(), datamodule=TinyDataModule())
    assert sum("'epoch' is reserved" in str(w.message) for w in record) == 1  # once
    fit = load_metrics_file(tmp_path / "fit_metrics.pt")
    assert fit["epoch"] == [0, 1, 2]
    assert fit["epoch_logged"] == [7.0, 17.0, 27.0]
    ds = load_experiment(tmp_path)
    assert ds["epoch"].values.tolist() == [0, 1, 2]
    assert ds["fit.epoch_logged"].values.tolist() == [7.0, 17.0, 27.0]
    assert MetricsCallback.final_metrics(trainer)["epoch_logged"] == 27.0
    assert "epoch" not in MetricsCallback.final_metrics(trainer)


def test_a_metric_logged_as_round_keeps_the_round_index(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    with pytest.warns(UserWarning, match="'round' is reserved"):
        trainer.test(_LogsEpoch(), datamodule=TinyDataModule())
    test = load_metrics_file(tmp_path / "test_metrics.pt")
    assert test["round"] == [0] and test["round_logged"] == [5.0]


def test_a_file_whose_epoch_index_was_overwritten_loads_by_position(tmp_path: Path) -> None:
    import torch

    # written by an older MetricsCallback: the user's "epoch" replaced the index
    torch.save(
        {"epoch": [math.nan, 7.0, 17.0], "val_loss": [1.0, 0.5, 0.25]}, tmp_path / "fit_metrics.pt"
    )
    with pytest.warns(UserWarning, match="are not an index"):
        ds = load_experiment(tmp_path)
    assert ds["epoch"].values.tolist() == [0, 1, 2]
    assert ds["fit.val_loss"].values.tolist() == [1.0, 0.5, 0.25]


def test_no_warning_without_a_reserved_name(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*is reserved.*")
        _trainer(tmp_path).fit(TinyModule(), datamodule=TinyDataModule())


def _returns_epoch(x: int) -> dict[str, float]:
    import torch

    from mushin_box import job_dir

    torch.save({"epoch": [0, 1], "val_loss": [1.0, 0.5]}, job_dir() / "fit_metrics.pt")
    return {"epoch": 1.0, "val": float(x)}


def test_a_returned_metric_named_epoch_does_not_clash_with_the_series(tmp_path: Path) -> None:
    from mushin_box import Workflow, multirun

    ds = Workflow(_returns_epoch).run(working_dir=tmp_path, progress=False, x=multirun([1, 2]))
    assert ds["metrics.epoch"].values.tolist() == [1.0, 1.0]
    assert ds["fit.val_loss"].dims == ("x", "epoch")

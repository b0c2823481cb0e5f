# SPDX-License-Identifier: MIT
"""MetricsCallback and load_experiment on a single-process fit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from mushin_box import MetricsCallback, load_experiment, load_metrics_file
from mushin_box.testing import TinyDataModule, TinyModule


def _trainer(tmp_path: Path, max_epochs: int = 3, **kw: object) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=max_epochs,
        callbacks=[MetricsCallback(save_dir=tmp_path)],
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
        **kw,  # type: ignore[arg-type]
    )


def test_fit_and_test_files_are_epoch_aligned_plain_data(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    trainer.fit(TinyModule(), datamodule=TinyDataModule())
    trainer.test(TinyModule(), datamodule=TinyDataModule())
    fit = torch.load(tmp_path / "fit_metrics.pt", weights_only=True)  # plain types only
    assert fit["epoch"] == [0, 1, 2]
    assert len(fit["train_loss"]) == len(fit["val_loss"]) == 3
    assert fit["val_loss"][2] < fit["val_loss"][0]  # it trained
    test = load_metrics_file(tmp_path / "test_metrics.pt")
    assert test["round"] == [0] and len(test["test_loss"]) == 1
    ds = load_experiment(tmp_path)
    assert ds["fit.val_loss"].dims == ("epoch",)
    assert ds["fit.val_loss"].values.tolist() == pytest.approx(fit["val_loss"])
    assert ds["test.test_loss"].dims == ("test_round",)


def test_validation_every_other_epoch_pads_with_nan(tmp_path: Path) -> None:
    _trainer(tmp_path, check_val_every_n_epoch=2, max_epochs=4).fit(
        TinyModule(), datamodule=TinyDataModule()
    )
    fit = load_metrics_file(tmp_path / "fit_metrics.pt")
    assert fit["epoch"] == [0, 1, 2, 3]
    val = fit["val_loss"]
    assert math.isnan(val[0]) and not math.isnan(val[1])
    assert math.isnan(val[2]) and not math.isnan(val[3])


def test_standalone_validate_goes_to_its_own_file(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    trainer.validate(TinyModule(), datamodule=TinyDataModule())
    assert not (tmp_path / "fit_metrics.pt").exists()
    assert load_metrics_file(tmp_path / "validate_metrics.pt")["round"] == [0]


def test_write_is_atomic_no_temp_files_left(tmp_path: Path) -> None:
    _trainer(tmp_path).fit(TinyModule(), datamodule=TinyDataModule())
    # only the final file: no temp file of the atomic writes is left behind
    assert [p.name for p in tmp_path.iterdir() if "fit_metrics" in p.name] == ["fit_metrics.pt"]


def test_load_experiment_errors_clearly_on_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_experiment(tmp_path / "nope")

# SPDX-License-Identifier: MIT
"""MetricsCallback and load_experiment on a single-process fit."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from mushin_box import MetricsCallback, load_experiment, load_metrics_file
from mushin_box.testing import TinyDataModule, TinyModule

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)


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


class _OpenEachWrite(pl.Callback):
    """After MetricsCallback's write at each epoch's end, open the metrics file as a reader
    would and keep it open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.readers: list[tuple[int, Any]] = []

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.readers.append((trainer.current_epoch, self.path.open("rb")))


def test_write_is_atomic_a_reader_never_sees_a_later_write(tmp_path: Path) -> None:
    """Atomic means a new file replaces the old one (temp file + rename): a reader that opened
    the file keeps a complete, unchanged version, whatever is written after. A write in place
    (truncate, then write the bytes) changes what every open reader sees: the reader of
    epoch 0 would read epoch 2's series, or a torn one mid-write."""
    probe = _OpenEachWrite(tmp_path / "fit_metrics.pt")
    trainer = _trainer(tmp_path)
    trainer.callbacks.append(probe)  # type: ignore[attr-defined]  # after MetricsCallback
    trainer.fit(TinyModule(), datamodule=TinyDataModule())
    assert [epoch for epoch, _ in probe.readers] == [0, 1, 2]
    inodes = set()
    for epoch, handle in probe.readers:
        with handle:
            inodes.add(os.fstat(handle.fileno()).st_ino)
            series = torch.load(io.BytesIO(handle.read()), weights_only=True)
        assert series["epoch"] == list(range(epoch + 1)), f"the reader of epoch {epoch}"
    assert len(inodes) == 3  # each write was a new file
    # only the final file: no temp file of the atomic writes is left behind
    names = sorted(p.name for p in tmp_path.iterdir() if "fit_metrics" in p.name)
    assert names == ["fit_metrics.json", "fit_metrics.pt"]


def test_load_experiment_errors_clearly_on_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_experiment(tmp_path / "nope")


def _checkpointed_fit(
    tmp_path: Path, ckpt_path: str | None = None, **kw: object
) -> tuple[pl.Trainer, MetricsCallback]:
    callback = MetricsCallback(save_dir=tmp_path)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback, ModelCheckpoint(tmp_path / "ckpt", save_last=True)],
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        **kw,  # type: ignore[arg-type]
    )
    trainer.fit(TinyModule(), datamodule=TinyDataModule(), ckpt_path=ckpt_path)
    return trainer, callback


def test_a_resumed_fit_with_nothing_left_to_train_reports_its_checkpoints_metrics(
    tmp_path: Path,
) -> None:
    """Resumed from a ``last.ckpt`` already at max_epochs, Lightning trains nothing and
    ``trainer.callback_metrics`` is empty: the fit's final metrics come from the
    MetricsCallback state saved in the checkpoint (a cell killed after its fit)."""
    first, _ = _checkpointed_fit(tmp_path, max_epochs=2)
    final = MetricsCallback.final_metrics(first)
    assert final == {k: float(v) for k, v in first.callback_metrics.items()}
    series = load_metrics_file(tmp_path / "fit_metrics.pt")
    assert final["train_loss"] == pytest.approx(series["train_loss"][-1])
    resumed, _ = _checkpointed_fit(tmp_path, str(tmp_path / "ckpt" / "last.ckpt"), max_epochs=2)
    assert not resumed.callback_metrics  # nothing was trained, nothing logged
    assert MetricsCallback.final_metrics(resumed) == final


def test_final_metrics_skip_rounds_a_metric_was_not_logged_in(tmp_path: Path) -> None:
    trainer, callback = _checkpointed_fit(tmp_path, max_epochs=3, check_val_every_n_epoch=2)
    series = load_metrics_file(tmp_path / "fit_metrics.pt")
    assert math.isnan(series["val_loss"][-1])  # no validation in the last epoch
    assert callback.last_fit_values()["val_loss"] == series["val_loss"][1]
    assert MetricsCallback.final_metrics(trainer)["val_loss"] == pytest.approx(
        float(trainer.callback_metrics["val_loss"])  # Lightning keeps the last one too
    )


def test_final_metrics_without_a_metrics_callback_are_the_callback_metrics(
    tmp_path: Path,
) -> None:
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(TinyModule(), datamodule=TinyDataModule())
    final = MetricsCallback.final_metrics(trainer)
    assert sorted(final) == ["train_loss", "val_loss"]
    assert final["val_loss"] == float(trainer.callback_metrics["val_loss"])

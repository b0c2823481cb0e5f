# SPDX-License-Identifier: MIT
"""MetricsCallback keeps each fit start (its epoch, world size and the job's attempt) in its
checkpointed state, and each epoch's world size beside its first batch: the history from
which the record says where a cell went on at another world size (issue 30, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from workflow_tasks import quiet_trainer

from mushin_box import MetricsCallback
from mushin_box._core.layout import FINGERPRINTS_FILE
from mushin_box._core.sidecars import read_json
from mushin_box._train.resume import next_attempt
from mushin_box.testing import TinyDataModule, TinyModule


def _fit(job: Path, epochs: int, ckpt: str | None = None) -> dict:
    from pytorch_lightning.callbacks import ModelCheckpoint

    callbacks = [MetricsCallback(), ModelCheckpoint(dirpath=job / "ckpt", save_last=True)]
    trainer = quiet_trainer(epochs, callbacks=callbacks)
    trainer.fit(TinyModule(), datamodule=TinyDataModule(global_batch_size=16), ckpt_path=ckpt)
    return read_json(job / FINGERPRINTS_FILE)


def test_a_resumed_fit_adds_its_start_after_the_restored_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    next_attempt(tmp_path)  # attempt 1
    first = _fit(tmp_path, 2)
    assert first["starts"] == [{"epoch": 0, "world_size": 1, "attempt": 1}]
    assert [(e["epoch"], e["world_size"]) for e in first["epochs"]] == [(0, 1), (1, 1)]

    next_attempt(tmp_path)  # attempt 2 goes on from last.ckpt: its start is epoch 2's
    again = _fit(tmp_path, 4, ckpt=str(tmp_path / "ckpt" / "last.ckpt"))
    assert again["starts"] == [
        {"epoch": 0, "world_size": 1, "attempt": 1},
        {"epoch": 2, "world_size": 1, "attempt": 2},
    ]
    assert [e["epoch"] for e in again["epochs"]] == [0, 1, 2, 3]


def test_without_an_attempt_counter_the_start_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))  # a plain fit: no sweep, no resumable
    assert _fit(tmp_path, 1)["starts"] == [{"epoch": 0, "world_size": 1, "attempt": None}]

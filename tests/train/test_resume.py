# SPDX-License-Identifier: MIT
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra_zen import make_config
from workflow_tasks import quiet_trainer

from mushin_box import ResumeContext, find_last_checkpoint, resumable, resume_context
from mushin_box._core.layout import FINGERPRINTS_FILE
from mushin_box._core.sidecars import write_json_atomic
from mushin_box._train.resume import ShortenedFitError, refuse_shortened

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)


def _touch(path: Path, mtime: int) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": 0}, path)  # a file torch can load: find_last_checkpoint checks
    os.utime(path, ns=(mtime * 10**9, mtime * 10**9))
    return path


def test_no_checkpoint(tmp_path: Path) -> None:
    assert find_last_checkpoint(tmp_path) is None
    assert find_last_checkpoint(tmp_path / "missing") is None


def test_last_ckpt_preferred_over_newer_epoch_ckpt_and_found_recursively(tmp_path: Path) -> None:
    last = _touch(tmp_path / "lightning_logs/version_0/checkpoints/last.ckpt", 100)
    _touch(tmp_path / "lightning_logs/version_0/checkpoints/epoch=3.ckpt", 200)
    assert find_last_checkpoint(tmp_path) == str(last)


def test_newest_last_ckpt_wins(tmp_path: Path) -> None:
    _touch(tmp_path / "a/last.ckpt", 100)
    newer = _touch(tmp_path / "b/last-v1.ckpt", 300)
    assert find_last_checkpoint(tmp_path) == str(newer)


def test_newest_ckpt_without_last(tmp_path: Path) -> None:
    _touch(tmp_path / "epoch=1.ckpt", 100)
    newest = _touch(tmp_path / "sub/epoch=2.ckpt", 200)
    assert find_last_checkpoint(tmp_path) == str(newest)


def test_resume_context_counts_attempts(tmp_path: Path) -> None:
    first = resume_context(tmp_path)
    second = resume_context(tmp_path)
    assert (first.attempt, second.attempt) == (1, 2)
    assert not first.is_resume and second.is_resume
    assert resume_context(tmp_path, attempt=7).attempt == 7  # looking does not count
    assert resume_context(tmp_path).attempt == 3


def test_resumable_fills_the_parameter_from_the_job_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    ckpt = _touch(tmp_path / "checkpoints/last.ckpt", 100)
    seen: list[ResumeContext] = []

    def task(x: int, mushin_resume: ResumeContext) -> int:
        seen.append(mushin_resume)
        return x

    assert resumable(task)(make_config(x=3)()) == 3
    assert seen[0] == ResumeContext(dir=tmp_path, last_ckpt=str(ckpt), attempt=1)


def test_resumable_without_the_parameter_is_plain_zen() -> None:
    def task(x: int) -> int:
        return x * 2

    assert resumable(task)(make_config(x=3)()) == 6


def _fit(root: Path, max_epochs: int, ckpt_path: str | None = None) -> None:
    """A TinyModule fit that keeps every epoch's checkpoint and ``last.ckpt`` in root/ckpt."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    from mushin_box.testing import TinyDataModule, TinyModule

    trainer = quiet_trainer(
        max_epochs,
        callbacks=[ModelCheckpoint(root / "ckpt", save_top_k=-1, save_last=True)],
        default_root_dir=root,
    )
    trainer.fit(TinyModule(), datamodule=TinyDataModule(), ckpt_path=ckpt_path)


def _epoch_of(path: str | Path) -> int:
    import torch

    return int(torch.load(path, map_location="cpu", weights_only=False)["epoch"])


def test_a_truncated_last_ckpt_falls_back_to_the_newest_intact_one(tmp_path: Path) -> None:
    _fit(tmp_path, max_epochs=2)
    last = tmp_path / "ckpt" / "last.ckpt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])  # killed while torch.save wrote it
    with pytest.warns(UserWarning, match="cannot be loaded") as caught:
        found = find_last_checkpoint(tmp_path)
    assert found is not None and Path(found).name != "last.ckpt"
    assert _epoch_of(found) == 1  # the newest that loads: the end of the last epoch
    message = str(caught[0].message)
    assert str(last) in message and found in message  # names the skipped and the used file
    _fit(tmp_path, max_epochs=3, ckpt_path=found)  # and the resume works from it
    assert _epoch_of(last) == 2


def test_no_loadable_checkpoint_means_none_with_a_warning(tmp_path: Path) -> None:
    _fit(tmp_path, max_epochs=1)
    for path in (tmp_path / "ckpt").iterdir():
        path.write_bytes(path.read_bytes()[:100])
    with pytest.warns(UserWarning, match="no checkpoint .* can be loaded"):
        assert find_last_checkpoint(tmp_path) is None


def test_a_checkpoint_in_torchs_legacy_format_is_still_found(tmp_path: Path) -> None:
    import torch

    legacy = tmp_path / "last.ckpt"
    torch.save({"epoch": 4}, legacy, _use_new_zipfile_serialization=False)
    assert find_last_checkpoint(tmp_path) == str(legacy)
    assert _epoch_of(legacy) == 4


def _trained(directory: Path, epochs: int, steps: int) -> Path:
    """A job directory whose fit fingerprints say it trained ``epochs`` epochs and
    ``steps`` steps (as ``MetricsCallback`` writes them at each epoch's end)."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [{"epoch": e, "step": (e + 1) * steps // epochs, "weights": "w"} for e in range(epochs)]
    write_json_atomic(directory / FINGERPRINTS_FILE, {"epochs": rows})
    return directory


def test_a_limit_below_what_the_fit_trained_is_refused_and_no_limit_is_not(
    tmp_path: Path,
) -> None:
    cell = _trained(tmp_path / "lr=0.1", epochs=4, steps=40)
    with pytest.raises(ShortenedFitError) as refused:
        refuse_shortened(cell, {"trainer.max_epochs": 3})
    said = str(refused.value)
    assert said.startswith("trainer.max_epochs=3 is below the 4 epochs cell lr=0.1 already")
    assert "give at least 4" in said and "\n" not in said
    with pytest.raises(ShortenedFitError, match="below the 40 steps"):
        refuse_shortened(cell, {"trainer.max_steps": 39})
    for fine in (
        {"trainer.max_epochs": 4},
        {"trainer.max_epochs": 9},
        {"trainer.max_steps": 40},
        # Lightning's "no limit", and a time limit it does not measure: nothing to refuse
        {"trainer.max_steps": -1, "trainer.max_epochs": -1},
        {"trainer.max_time": "00:00:01:00"},
    ):
        refuse_shortened(cell, fine)
    refuse_shortened(tmp_path / "never-fitted", {"trainer.max_epochs": 1})

# SPDX-License-Identifier: MIT
"""load_experiment of a plain hydra-zen ``--multirun`` sweep (no Workflow.run), and of
directories it cannot read."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra_zen import launch, make_config, zen
from workflow_tasks import quiet_trainer

from mushin_box import MetricsCallback, load_experiment
from mushin_box.testing import TinyDataModule, TinyModule

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)


def _fit(lr: float, seed: int) -> None:
    import pytorch_lightning as pl

    pl.seed_everything(seed)
    trainer = quiet_trainer(2, callbacks=[MetricsCallback()], enable_checkpointing=False)
    trainer.fit(TinyModule(lr=lr), datamodule=TinyDataModule())


def _write_series(lr: float, name: str = "fake") -> None:
    """What MetricsCallback writes, without a fit: a 3-epoch series in the job dir."""
    from hydra.core.hydra_config import HydraConfig

    job = Path(HydraConfig.get().runtime.output_dir)
    torch.save({"epoch": [0, 1, 2], "val_loss": [lr, lr / 2, lr / 4]}, job / "fit_metrics.pt")


def _multirun(root: Path, task: Any, *overrides: str, **config: Any) -> None:
    launch(
        make_config(**config),
        zen(task),
        overrides=[f"hydra.sweep.dir={root}", *overrides],
        multirun=True,
        version_base="1.3",
    )


def test_a_plain_multirun_of_metrics_callback_fits_is_aggregated(tmp_path: Path) -> None:
    _multirun(tmp_path, _fit, "lr=0.05,0.1", "seed=3", lr=0.1, seed=0)
    assert len(list(tmp_path.glob("*/fit_metrics.pt"))) == 2
    ds = load_experiment(tmp_path)
    # one dimension per swept override; the constant seed=3 is no dimension
    assert ds["fit.val_loss"].dims == ("lr", "epoch")
    assert ds["lr"].values.tolist() == [0.05, 0.1]
    assert ds["epoch"].values.tolist() == [0, 1]
    assert not ds["fit.val_loss"].isnull().any()
    assert ds["cell_dir"].values.tolist() == ["0", "1"]
    assert ds.attrs["params"] == ["lr"]


def test_every_swept_override_is_a_dimension_and_missing_jobs_are_nan(tmp_path: Path) -> None:
    def task(lr: float, name: str) -> None:
        _write_series(lr)

    _multirun(tmp_path, task, "lr=0.4,0.8", "name=a,'b c'", lr=0.1, name="x")
    shutil.rmtree(tmp_path / "3")  # a job that never started (e.g. still queued)
    ds = load_experiment(tmp_path)
    assert ds["fit.val_loss"].dims == ("lr", "name", "epoch")
    assert ds["name"].values.tolist() == ["a", "b c"]
    assert ds["fit.val_loss"].sel(lr=0.4, name="b c").values.tolist() == [0.4, 0.2, 0.1]
    assert ds["fit.val_loss"].sel(lr=0.8, name="b c").isnull().all()
    assert ds["cell_dir"].sel(lr=0.8, name="b c").item() == ""


def test_a_job_dir_without_its_overrides_says_what_is_missing(tmp_path: Path) -> None:
    def task(lr: float) -> None:
        _write_series(lr)

    _multirun(tmp_path, task, "lr=0.4,0.8", lr=0.1)
    (tmp_path / "1" / ".hydra" / "overrides.yaml").unlink()
    with pytest.raises(FileNotFoundError, match=r"1.*\.hydra/overrides\.yaml"):
        load_experiment(tmp_path)


def test_a_plain_multirun_without_metrics_files_warns(tmp_path: Path) -> None:
    _multirun(tmp_path, lambda lr: None, "lr=0.4,0.8", lr=0.1)
    with pytest.warns(UserWarning, match="fit_metrics.pt"):
        ds = load_experiment(tmp_path)
    assert ds.sizes["lr"] == 2


def test_a_directory_with_no_results_says_what_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(FileNotFoundError, match="multirun.yaml") as info:
        load_experiment(tmp_path)
    assert str(tmp_path) in str(info.value) and "fit_metrics.pt" in str(info.value)


def test_a_job_dir_still_loads_alone(tmp_path: Path) -> None:
    def task(lr: float) -> None:
        _write_series(lr)

    _multirun(tmp_path, task, "lr=0.4,0.8", lr=0.1)
    ds = load_experiment(tmp_path / "1")
    assert ds["fit.val_loss"].values.tolist() == [0.8, 0.4, 0.2]
    assert not math.isnan(ds["fit.val_loss"].values[0])

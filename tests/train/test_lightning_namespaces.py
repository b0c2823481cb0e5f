# SPDX-License-Identifier: MIT
"""HydraDDP, MetricsCallback and the resume contract with either Lightning namespace.

``import pytorch_lightning as pl`` takes ``mushin_box.HydraDDP``; ``import lightning as L``
takes ``mushin_box.lightning.HydraDDP`` (a Trainer refuses the other namespace's classes).
The same fit, 2 CPU ranks on gloo, gives the same metrics either way.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, read_rank_logs
from ddp_helpers import KITS, TINY, fit_task, make_app_config
from hydra_zen import launch

from mushin_box import load_metrics_file, resumable
from mushin_box._train.configtask import seed_pre_call
from mushin_box._train.ddp import end_local_job


def _fit(namespace: str, job: Path, max_epochs: int) -> dict[str, Any]:
    try:
        result = launch(
            make_app_config(max_epochs=max_epochs, lightning=namespace),
            resumable(fit_task, pre_call=seed_pre_call),  # seeded before the model is built
            overrides=[f"hydra.run.dir={job}"],
            version_base="1.3",
        )
    finally:
        end_local_job()  # as a sweep's cell ends: its ranks and process group go
    return result.return_value


@pytest.mark.slow
def test_a_fit_on_two_ranks_gives_the_same_metrics_with_either_lightning_namespace(
    cleandir: Path, rank_log: Path
) -> None:
    # pl: 2 epochs at once; L: 1 epoch, then resumed (mushin_resume.last_ckpt) to 2
    pl_job, l_job = cleandir / "pl", cleandir / "L"
    assert _fit("pytorch_lightning", pl_job, 2) == {"seed": 1234, "world_size": 2, "attempt": 1}
    assert _fit("lightning.pytorch", l_job, 1)["attempt"] == 1
    assert _fit("lightning.pytorch", l_job, 2) == {"seed": 1234, "world_size": 2, "attempt": 2}

    assert "_target_: mushin_box.lightning.HydraDDP" in (l_job / ".hydra/config.yaml").read_text()
    epochs = [r["epoch"] for r in read_rank_logs(rank_log)[1]]  # rank 1: its own process
    assert epochs == ["0", "1", "0", "1"], "rank 1 trained pl's 2 epochs, then L's 1 + 1"
    pl_metrics = load_metrics_file(pl_job / "fit_metrics.json")
    assert pl_metrics["epoch"] == [0, 1] and set(pl_metrics) == {"epoch", "train_loss", "val_loss"}
    assert load_metrics_file(l_job / "fit_metrics.json") == pl_metrics, pl_metrics


@pytest.mark.parametrize("namespace", sorted(KITS))
def test_a_trainer_takes_the_kits_classes_of_its_own_namespace_only(
    namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    trainers = importlib.import_module(namespace)
    kit = importlib.import_module(KITS[namespace])
    quiet = {"enable_progress_bar": False, "enable_model_summary": False, "logger": False}
    trainer = trainers.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        strategy=kit.HydraDDP(),
        callbacks=[kit.MetricsCallback(save_dir=tmp_path, fingerprints=False)],
        enable_checkpointing=False,
        default_root_dir=tmp_path,
        **quiet,
    )
    tiny = importlib.import_module(TINY[namespace])
    trainer.fit(tiny.TinyModule(), datamodule=tiny.TinyDataModule())
    assert load_metrics_file(tmp_path / "fit_metrics.json")["epoch"] == [0]
    assert kit.MetricsCallback.final_metrics(trainer).keys() >= {"train_loss", "val_loss"}
    assert "LOCAL_RANK" not in os.environ  # the one-process run left no trace
    other = importlib.import_module(next(k for n, k in KITS.items() if n != namespace))
    with pytest.raises(ValueError, match="strategy"):  # why each namespace has its classes
        trainers.Trainer(accelerator="cpu", devices=1, strategy=other.HydraDDP(), **quiet)


@pytest.mark.slow  # a subprocess that imports lightning: seconds
def test_the_lightning_door_imports_only_its_namespace() -> None:
    code = (
        "import sys, mushin_box\n"
        "assert 'lightning' not in sys.modules, 'import mushin_box loaded lightning'\n"
        "from mushin_box.lightning import HydraDDP, MetricsCallback, TinyModule\n"
        "assert 'pytorch_lightning' not in sys.modules and 'lightning_fabric' not in sys.modules\n"
        "print(HydraDDP.__module__, MetricsCallback.__module__, TinyModule.__module__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["mushin_box.lightning"] * 3

# SPDX-License-Identifier: MIT
"""A cell killed after its fit finished, before its status said so: resumed, it reports
the fit's metrics, and never replaces good metrics on disk with fewer."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from workflow_tasks import quiet_trainer

from mushin_box import ResumeContext, Workflow
from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main


def _killed_before_status(cell: Path, *, metrics_written: bool) -> None:
    """What a kill between the end of the task and the "completed" status leaves."""
    status = read_json(cell / "mushin_status.json")
    (cell / "mushin_status.json").write_text(json.dumps({**status, "status": "running"}))
    if not metrics_written:
        (cell / "mushin_metrics.json").unlink()


def naive_fit(max_epochs: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """A user's task that returns ``trainer.callback_metrics`` as they are."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    from mushin_box.testing import TinyDataModule, TinyModule

    trainer = quiet_trainer(
        max_epochs,
        callbacks=[ModelCheckpoint(mushin_resume.dir / "ckpt", save_last=True)],
    )
    trainer.fit(TinyModule(), datamodule=TinyDataModule(), ckpt_path=mushin_resume.last_ckpt)
    return {name: float(value) for name, value in trainer.callback_metrics.items()}


def test_fewer_metrics_on_resume_keep_the_previous_values_with_a_warning(
    tmp_path: Path,
) -> None:
    wf = Workflow(naive_fit)
    wf.run(working_dir=tmp_path, progress=False, max_epochs=2)
    cell = tmp_path / "cell"
    fitted = read_json(cell / "mushin_metrics.json")
    assert sorted(fitted) == ["train_loss", "val_loss"]
    _killed_before_status(cell, metrics_written=True)
    with pytest.warns(UserWarning, match=r"train_loss, val_loss.*previous attempt"):
        ds = wf.run(working_dir=tmp_path, progress=False, max_epochs=2, resume=True)
    assert read_json(cell / "mushin_metrics.json") == fitted  # not {}
    status = read_json(cell / "mushin_status.json")
    assert status["status"] == "completed"
    assert status["metrics_carried_over"] == ["train_loss", "val_loss"]
    assert ds["val_loss"].item() == fitted["val_loss"]


def attempt_task(p: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """Both metrics, then a failure, then one metric: by attempt number."""
    if mushin_resume.attempt == 2:
        raise ValueError("planned failure")
    if mushin_resume.attempt == 1:
        return {"a": float(p), "b": float(p)}
    return {"a": float(p)}


def test_metrics_of_another_config_are_never_carried_over(tmp_path: Path) -> None:
    wf = Workflow(attempt_task)
    wf.run(working_dir=tmp_path, progress=False, p=1)
    cell = tmp_path / "cell"
    wf.run(working_dir=tmp_path, progress=False, p=2, on_error="nan")  # afresh, fails
    assert read_json(cell / "mushin_status.json")["status"] == "failed"
    assert not (cell / "mushin_metrics.json").exists()  # p=1's metrics: set aside
    wf.run(working_dir=tmp_path, progress=False, p=2, resume=True)
    assert read_json(cell / "mushin_metrics.json") == {"a": 2.0}  # no b from p=1
    assert "metrics_carried_over" not in read_json(cell / "mushin_status.json")


def _load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"example_{name}", REPO / "examples" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("metrics_written", [True, False])
def test_the_example_sweeps_task_reports_a_finished_fits_metrics(
    tmp_path: Path, metrics_written: bool
) -> None:
    example = _load_example("sweep.py")
    wf = Workflow(example.train, example.Config, pre_call=example.seed_ranks)
    # one rank, without HydraDDP: in this process it would leave its process group bound
    # to MASTER_PORT, which later subprocesses inherit (EADDRINUSE)
    one_rank: dict[str, Any] = {
        "trainer.devices": 1,
        "trainer.strategy": "auto",
        "trainer.max_epochs": 2,
    }
    wf.run(working_dir=tmp_path, progress=False, **one_rank)
    cell = tmp_path / "cell"
    fitted = read_json(cell / "mushin_metrics.json")
    _killed_before_status(cell, metrics_written=metrics_written)
    wf.run(working_dir=tmp_path, progress=False, resume=True, **one_rank)
    assert read_json(cell / "mushin_metrics.json") == fitted
    status = read_json(cell / "mushin_status.json")
    assert status["status"] == "completed" and "metrics_carried_over" not in status


def _launch(work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [str(REPO / "examples" / "exp.py"), "--gpus", "1", "--local", "--no-progress"]
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", *args, "--working-dir", str(work)]
        + ["trainer.max_epochs=2", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.slow
def test_launch_resume_after_a_finished_fit_keeps_its_metrics(tmp_path: Path) -> None:
    proc = _launch(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    cell = tmp_path / "cell"
    fitted = read_json(cell / "mushin_metrics.json")
    assert sorted(fitted) == ["train_loss", "val_loss"]
    for metrics_written in (True, False):
        _killed_before_status(cell, metrics_written=metrics_written)
        proc = _launch(tmp_path, "--resume")
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
        assert read_json(cell / "mushin_metrics.json") == fitted  # the fit's, not {}
        status = read_json(cell / "mushin_status.json")
        assert status["status"] == "completed" and "metrics_carried_over" not in status


def naive_fit_with_series(max_epochs: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """``naive_fit`` with a MetricsCallback: its series are restored with the checkpoint."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    from mushin_box import MetricsCallback
    from mushin_box.testing import TinyDataModule, TinyModule

    trainer = quiet_trainer(
        max_epochs,
        callbacks=[
            ModelCheckpoint(mushin_resume.dir / "ckpt", save_last=True),
            MetricsCallback(),
        ],
    )
    trainer.fit(TinyModule(), datamodule=TinyDataModule(), ckpt_path=mushin_resume.last_ckpt)
    return {name: float(value) for name, value in trainer.callback_metrics.items()}


@pytest.mark.parametrize("series", [True, False])
def test_a_fit_killed_before_its_metrics_were_written_reports_what_its_checkpoint_restored(
    tmp_path: Path, series: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    # any task: one returning trainer.callback_metrics gets {} from a fit with nothing left
    wf = Workflow(naive_fit_with_series if series else naive_fit)
    wf.run(working_dir=tmp_path, progress=False, max_epochs=2)
    cell = tmp_path / "cell"
    fitted = read_json(cell / "mushin_metrics.json")
    _killed_before_status(cell, metrics_written=False)
    if series:
        with pytest.warns(UserWarning, match=r"reporting train_loss, val_loss as its checkpoint"):
            wf.run(working_dir=tmp_path, progress=False, max_epochs=2, resume=True)
        assert read_json(cell / "mushin_metrics.json") == fitted  # the fit's last values
    else:  # nothing to report them from: said, never silent
        with pytest.warns(UserWarning, match=r"no MetricsCallback series .* has no metrics"):
            wf.run(working_dir=tmp_path, progress=False, max_epochs=2, resume=True)
    status = read_json(cell / "mushin_status.json")
    assert status["status"] == "completed"
    # the warning reaches only the job's log on a cluster: the status says it too
    assert ("reason" in status) is not series
    if not series:
        assert status["reason"].startswith("no metrics: it continued a finished fit")
        capsys.readouterr()
        assert main(["status", str(tmp_path)]) == 0
        assert "no metrics: it continued a finished fit" in capsys.readouterr().out
        assert main(["wait", str(tmp_path), "--no-progress"]) == 0
        assert "completed cell  no metrics: it continued" in capsys.readouterr().out

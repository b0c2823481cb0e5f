# SPDX-License-Identifier: MIT
"""A value the task needs and nobody gives is refused before anything is launched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra_zen import make_config

from mushin_box import Workflow, multirun
from mushin_box._sweep.compose import MissingValueError


def needs_lr(lr: float, epochs: int = 1) -> dict[str, float]:
    return {"loss": lr * epochs}


def test_a_task_parameter_given_nowhere_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with pytest.raises(MissingValueError, match=r"^lr is required by the task .* lr=VALUE") as no:
        Workflow(needs_lr, make_config(epochs=1)).run(working_dir=tmp_path / "w")
    # said to a Python caller too: no "command line" it never used
    assert "keyword of Workflow.run" in str(no.value) and "command line" not in str(no.value)
    # the config built from the signature says it with '???'
    with pytest.raises(MissingValueError, match=r"^lr is '\?\?\?' \(required\)"):
        Workflow(needs_lr).run(working_dir=tmp_path / "w", epochs=multirun([1, 2]))
    assert not (tmp_path / "w").exists()
    ds = Workflow(needs_lr).run(working_dir=tmp_path / "w", lr=0.5)  # given: it runs
    assert float(ds["loss"]) == 0.5


def test_a_missing_value_in_the_config_is_refused_naming_its_key(tmp_path: Path) -> None:
    config = make_config(lr=0.1, epochs="???")
    with pytest.raises(MissingValueError, match=r"^epochs is '\?\?\?' \(required\)"):
        Workflow(needs_lr, config).run(working_dir=tmp_path / "w", lr=multirun([0.1, 0.2]))
    assert not (tmp_path / "w").exists()


EXP = """
from hydra_zen import builds, make_config
import pytorch_lightning as pl
from mushin_box.testing import TinyDataModule, TinyModule

Config = make_config(
    trainer=builds(pl.Trainer, accelerator="cpu", max_epochs=1, logger=False),
    module=builds(TinyModule, lr="???"),
    datamodule=builds(TinyDataModule),
)
"""


@pytest.mark.slow
def test_launch_and_its_dry_run_refuse_it_in_one_line(tmp_path: Path) -> None:
    exp = tmp_path / "needs_value_exp.py"
    exp.write_text(EXP)
    base = [sys.executable, "-m", "mushin_box", "launch", str(exp), "--local", "--gpus", "1"]
    run = subprocess.run(
        [*base, "--working-dir", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert "module.lr is '???' (required)" in run.stderr.splitlines()[-1]  # one line
    assert not (tmp_path / "w").exists()
    dry = subprocess.run(
        [*base, "--dry-run", "--json"], capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    errors = json.loads(dry.stdout)["errors"]
    assert any("module.lr is '???' (required)" in e for e in errors), errors

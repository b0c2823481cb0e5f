# SPDX-License-Identifier: MIT
"""``mushin-box launch --print-config``: the config the first cell's task would receive,
as YAML, secrets as references; nothing created, nothing submitted; flags that ask for
something else are refused in one line."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from test_cli_launch import EXP, launch
from test_cli_launch_refusals import assert_one_line_refusal, fake_slurm, launch_env

NOT_IMPORTED = "raise RuntimeError('the experiment was imported')\n"
SECRET = "hunter2-s3cret-value"

# a config whose defaults hold secrets: under a secret-looking key, and inside a URL
SECRET_EXP = f"""
from hydra_zen import make_config

Config = make_config(
    lr=0.1,
    steps=3,
    db=dict(password="{SECRET}", host="db.example"),
    mirror="https://me:{SECRET}@mirror.example/x",
    note="{SECRET}",  # the same literal under a plain key: cut out all the same
)
"""


def _config(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return yaml.safe_load(proc.stdout)


def test_prints_the_first_cell_with_the_launch_topology_and_creates_nothing(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = launch(
        str(EXP),
        "--gpus",
        "2",
        "--local",
        "--print-config",
        "--working-dir",
        str(work / "sweep"),
        "module.lr=0.01,0.1",
        "trainer.max_epochs=1,2",
        cwd=work,
    )
    cfg = _config(proc)
    # the sweep's first values, the --gpus topology, the local launch's CPU ranks
    assert cfg["module"]["lr"] == 0.01 and cfg["trainer"]["max_epochs"] == 1
    assert cfg["trainer"]["devices"] == 2 and cfg["trainer"]["num_nodes"] == 1
    assert cfg["trainer"]["accelerator"] == "cpu"
    assert "hydra" not in cfg  # what the task receives, not Hydra's own node
    # unresolved, as Hydra's --cfg job prints it: ${hydra:...} has a value only in a job
    assert cfg["trainer"]["default_root_dir"] == "${hydra:runtime.output_dir}"
    assert "first of 4 cell(s)" in proc.stderr
    assert list(work.iterdir()) == []  # no sweep directory, no .mushin-box/


def test_secrets_are_references_never_values(tmp_path: Path) -> None:
    exp = tmp_path / "secret_exp.py"
    exp.write_text(SECRET_EXP)
    token = "tok-" + SECRET[::-1]
    proc = launch(
        str(exp), "--local", "--print-config", f"+wandb.api_key={token}", "steps=5", cwd=tmp_path
    )
    cfg = _config(proc)
    assert SECRET not in proc.stdout + proc.stderr and token not in proc.stdout + proc.stderr
    for value in (cfg["db"]["password"], cfg["mirror"], cfg["wandb"]["api_key"]):
        assert value.startswith("${oc.env:MUSHIN_SECRET_"), value
    assert cfg["db"]["host"] == "db.example" and cfg["steps"] == 5
    assert cfg["note"] == "<redacted>"


def test_on_slurm_it_composes_without_submitting_or_checking_the_image(tmp_path: Path) -> None:
    env = fake_slurm(tmp_path)
    proc = launch_env(
        str(EXP),
        "--slurm",
        "--nodes",
        "2",
        "--gpus",
        "4",
        "--image",
        str(tmp_path / "not-built-yet.sif"),
        "--print-config",
        "trainer.accelerator=gpu",
        env=env,
        cwd=tmp_path,
    )
    cfg = _config(proc)
    assert cfg["trainer"]["devices"] == 4 and cfg["trainer"]["num_nodes"] == 2
    assert cfg["trainer"]["accelerator"] == "gpu"
    assert "on SLURM (--slurm)" in proc.stderr
    assert not (tmp_path / "sbatch-called").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-slurm-bin"]


@pytest.mark.parametrize("flag", ["--dry-run", "--detach", "--cancel-on-interrupt"])
def test_conflicting_flags_are_refused_before_the_experiment_is_imported(
    tmp_path: Path, flag: str
) -> None:
    exp = tmp_path / "never_exp.py"
    exp.write_text(NOT_IMPORTED)
    proc = launch(str(exp), "--local", "--print-config", flag, cwd=tmp_path)
    line = assert_one_line_refusal(proc, "--print-config", f"drop {flag}")
    assert "imported" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["never_exp.py"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("module.lrr=0.1", "did you mean 'lr'?"),
        ("trainer.max_epochs=abc", "could not be converted to Integer"),
    ],
)
def test_an_override_the_launch_would_refuse_is_refused(
    tmp_path: Path, override: str, message: str
) -> None:
    proc = launch(str(EXP), "--local", "--print-config", override, cwd=tmp_path)
    assert_one_line_refusal(proc, message)
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


def test_a_sweep_over_a_secret_is_refused(tmp_path: Path) -> None:
    exp = tmp_path / "secret_exp.py"
    exp.write_text(SECRET_EXP)
    proc = launch(
        str(exp), "--local", "--print-config", f"db.password={SECRET},other", cwd=tmp_path
    )
    line = assert_one_line_refusal(proc, "cannot sweep over 'db.password'")
    assert SECRET not in line and SECRET not in proc.stdout
    assert os.listdir(tmp_path) == ["secret_exp.py"]


def test_the_parser_knows_the_flag() -> None:
    from mushin_box.cli.main import parse_args

    args = parse_args(["launch", "exp.py", "--print-config", "lr=1"])
    assert args.print_config and args.overrides == ["lr=1"]


def test_a_workflows_declared_secrets_are_references_too(tmp_path: Path) -> None:
    exp = tmp_path / "wf_exp.py"
    exp.write_text(
        "from mushin_box import Workflow\n\n\n"
        "def task(x: int = 1, steps: int = 11, db_password: str = 'pw-1234567') -> dict:\n"
        "    return {'y': float(x)}\n\n\n"
        "workflow = Workflow(task, secrets=['x'])\n"
    )
    cfg = _config(launch(str(exp), "--local", "--print-config", cwd=tmp_path))
    # a declared secret, a number: read back with its type; a short value (1) spoils nothing
    assert re.fullmatch(r"\$\{oc\.decode:\$\{oc\.env:MUSHIN_SECRET_[0-9A-F]{16}\}\}", cfg["x"])
    assert cfg["db_password"].startswith("${oc.env:MUSHIN_SECRET_") and cfg["steps"] == 11

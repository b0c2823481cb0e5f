# SPDX-License-Identifier: MIT
"""``mushin-box launch EXP --nodes N --gpus G``: here on CPU ranks, or on the local SLURM
cluster with one task per (fake) GPU; the plan, and every usage error (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from mushin_box._core.sidecars import read_json

EXP = REPO / "examples" / "exp.py"


def launch(
    *args: str, cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def plan(*args: str) -> dict[str, Any]:
    proc = launch(*args, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_plan_on_slurm_derives_one_task_per_gpu_and_the_trainer_topology(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mushin_box",
            "launch",
            str(EXP),
            "--nodes",
            "2",
            "--gpus",
            "4",
            "--partition",
            "gpu",
            "--time",
            "30",
            "module.lr=0.01,0.1",
            "--slurm",  # the stand-in sbatch: no controller to ask
            "--dry-run",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_fake_sbatch_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["mode"] == "slurm" and got["launcher"] == "mushin_slurm"
    cfg = got["launcher_config"]
    assert (cfg["nodes"], cfg["gpus_per_node"], cfg["tasks_per_node"]) == (2, 4, 4)
    assert (cfg["partition"], cfg["timeout_min"]) == ("gpu", 30)
    assert got["overrides"] == [
        "module.lr=0.01,0.1",
        "++trainer.devices=4",
        "++trainer.num_nodes=2",
    ]
    assert got["pythonpath"] == str(EXP.parent)  # the ranks import exp.py's module


def test_plan_here_runs_cpu_ranks() -> None:
    got = plan(str(EXP), "--gpus", "2", "--local")
    assert got["mode"] == "local" and got["launcher"] is None
    assert got["overrides"][-1] == "++trainer.accelerator='cpu'"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "argument --nodes: '0' must be a positive integer"),
        (["--gpus=-2"], "argument --gpus: '-2' must be a positive integer"),
        (["--nodes", "2", "--local"], "--nodes 2 needs SLURM"),
        (["--local", "--image", "x.sif"], "mushin-box smoke"),
        (["--local", "trainer.devices=3"], "conflicts with --nodes/--gpus"),
        (["--local", "lr=="], "bad override 'lr==': "),  # which one, in one line
    ],
)
def test_usage_errors_exit_2_with_the_fix(args: list[str], message: str) -> None:
    proc = launch(str(EXP), *args, "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_experiment_errors_exit_2(tmp_path: Path) -> None:
    assert "does not exist" in launch(str(tmp_path / "nope.py")).stderr
    bad = tmp_path / "my-exp.py"
    bad.write_text("Config = 1\n")
    proc = launch(str(bad))
    assert proc.returncode == 2 and "not a Python module name" in proc.stderr
    empty = tmp_path / "empty_exp.py"
    empty.write_text("x = 1\n")
    proc = launch(str(empty))
    assert proc.returncode == 2 and "defines none of workflow, Config" in proc.stderr
    # a config-only experiment without HydraDDP cannot start CPU ranks here
    plain = tmp_path / "plain_exp.py"
    plain.write_text(
        textwrap.dedent("""
        from hydra_zen import builds, make_config
        import pytorch_lightning as pl
        Config = make_config(trainer=builds(pl.Trainer), module=builds(dict))
    """)
    )
    proc = launch(str(plain), "--gpus", "2", "--local", "--dry-run")
    assert proc.returncode == 2 and "strategy is not HydraDDP" in proc.stderr


@pytest.mark.slow
def test_two_cpu_ranks_here(tmp_path: Path) -> None:
    work = tmp_path / "sweep"
    proc = launch(
        str(EXP),
        "--gpus",
        "2",
        "--local",
        "--working-dir",
        str(work),
        "--no-progress",
        "module.lr=0.01,0.1",
        "trainer.max_epochs=2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "completed module.lr=0.01" in proc.stdout and "val_loss=" in proc.stdout
    for cell in ("module.lr=0.01", "module.lr=0.1"):
        status = read_json(work / cell / "mushin_status.json")
        assert status["status"] == "completed"
        topology = read_json(work / cell / "mushin_provenance.json")["run"]["topology"]
        assert topology["world_size"] == 2  # HydraDDP started the second CPU rank
        assert len(list((work / cell).rglob("fit_metrics.pt"))) == 1
    # the same experiment on 1 rank: the same experiment by its provenance (diff exits 0)
    one = tmp_path / "one"
    proc = launch(
        str(EXP),
        "--gpus",
        "1",
        "--local",
        "--working-dir",
        str(one),
        "--no-progress",
        "module.lr=0.1",
        "trainer.max_epochs=2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    diff = subprocess.run(
        [
            sys.executable,
            "-m",
            "mushin_box",
            "diff",
            str(one / "cell"),
            str(work / "module.lr=0.1"),
            "--json",
            "--atol",
            "1e-6",  # the same results, to the reduction order of 2 ranks against 1
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr
    assert "run.topology.world_size" in diff.stdout  # reported as expected to differ
    assert json.loads(diff.stdout)["verdict"] == "same experiment, same results"


@pytest.mark.slurm
@pytest.mark.slow
def test_two_nodes_two_gpus_on_slurm(slurm_cluster: Any, tmp_path: Path) -> None:
    # an experiment file outside the repository, with its own LightningModule: every SLURM
    # rank must import it (its directory travels on PYTHONPATH)
    exp = tmp_path / "exps" / "my_exp.py"
    exp.parent.mkdir()
    text = EXP.read_text().replace("module=builds(TinyModule,", "module=builds(MyModule,")
    text = text.replace(
        "Config = make_config(", "class MyModule(TinyModule):\n    pass\n\n\nConfig = make_config("
    )
    exp.write_text(text)
    work = tmp_path / "sweep"
    proc = launch(
        str(exp),
        "--nodes",
        "2",
        "--gpus",
        "2",
        "--partition",
        slurm_cluster.partition,
        "--time",
        "5",
        "--working-dir",
        str(work),
        "--no-progress",
        "trainer.max_epochs=1",
        "module.lr=0.01,0.1",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for cell in ("module.lr=0.01", "module.lr=0.1"):
        status = read_json(work / cell / "mushin_status.json")
        assert status["status"] == "completed" and status["slurm_job_id"]
        run = read_json(work / cell / "mushin_provenance.json")["run"]
        assert run["topology"]["world_size"] == 4 and run["topology"]["num_nodes"] == 2
        assert len(list((work / cell).rglob("fit_metrics.pt"))) == 1
    cfg = (work / "module.lr=0.01" / ".hydra" / "config.yaml").read_text()
    assert "devices: 2" in cfg and "num_nodes: 2" in cfg and "my_exp.MyModule" in cfg


@pytest.mark.slurm
@pytest.mark.slow
def test_every_slurm_rank_in_the_standin_image(slurm_cluster: Any, tmp_path: Path) -> None:
    """``--image``: each SLURM task runs ``apptainer exec --nv --cleanenv --env-file ...``
    through the Apptainer STAND-IN (tests/standins/apptainer-standin; not Apptainer), and
    the image's identity from its manifest reaches every cell's provenance."""
    from conftest import APPTAINER_STANDIN as STANDIN
    from conftest import standin_image

    from mushin_box._image.sif import file_sha256

    image = standin_image(tmp_path)
    work = tmp_path / "sweep"
    env = {**os.environ, "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mushin_box",
            "launch",
            str(EXP),
            "--gpus",
            "2",
            "--partition",
            slurm_cluster.partition,
            "--time",
            "5",
            "--image",
            str(image),
            "--image-python",
            sys.executable,
            "--working-dir",
            str(work),
            "--no-progress",
            "trainer.max_epochs=1",
            "module.lr=0.01,0.1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for cell in ("module.lr=0.01", "module.lr=0.1"):
        record = read_json(work / cell / "mushin_provenance.json")
        assert record["reproducibility"]["image"]["sif_sha256"] == file_sha256(image)
        assert record["reproducibility"]["image"]["base_digest"] == "sha256:" + "1" * 64
        argv = record["run"]["container"]["rank_argv"]
        assert argv[:4] == ["apptainer", "exec", "--nv", "--cleanenv"] and str(image) in argv
        assert record["run"]["topology"]["world_size"] == 2
        assert len(list((work / cell).rglob("fit_metrics.pt"))) == 1


def test_experiment_names_that_would_break_imports_exit_2(tmp_path: Path) -> None:
    # named like an installed module: first on sys.path/PYTHONPATH it would hide it
    shadow = tmp_path / "yaml.py"
    shadow.write_text("Config = 1\n")
    for cwd in (None, tmp_path):  # elsewhere, and its own directory (sys.path[0] of -m)
        proc = launch(str(shadow), "--local", "--dry-run", cwd=cwd)
        assert proc.returncode == 2, proc.stderr
        assert "Rename the experiment file" in proc.stderr and "Traceback" not in proc.stderr
    # a module whose package does not exist
    proc = launch("nopkg.exp:Config", "--local", "--dry-run")
    assert proc.returncode == 2, proc.stderr
    assert "could not load experiment 'nopkg.exp:Config': there is no module 'nopkg'" in proc.stderr
    assert "Traceback" not in proc.stderr


WORKFLOW_EXP = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    raise ValueError("the task's own error")


workflow = Workflow(task)
"""


def test_a_tasks_value_error_is_not_a_usage_error(tmp_path: Path) -> None:
    exp = tmp_path / "wf_exp.py"
    exp.write_text(WORKFLOW_EXP)
    common = ("--local", "--no-progress", "--working-dir")
    # the cell ran, failed and was recorded; --on-error raise re-raises its error as is
    proc = launch(str(exp), *common, str(tmp_path / "a"), "--on-error", "raise", "x=2")
    assert proc.returncode == 1, proc.stderr
    assert "ValueError: the task's own error" in proc.stderr
    assert read_json(tmp_path / "a" / "cell" / "mushin_status.json")["status"] == "failed"
    # the same run again (a manifest already there): still the task's error
    proc = launch(str(exp), *common, str(tmp_path / "a"), "--on-error", "raise", "x=2")
    assert proc.returncode == 1 and "the task's own error" in proc.stderr
    # refused before the sweep started: usage errors, nothing ran
    for args, message in [
        ((*common, str(tmp_path / "b"), "not_a_field=1"), "'not_a_field' is neither a field"),
        ((*common, str(tmp_path / "a"), "+api_token=a,b"), "cannot sweep over 'api_token'"),
        (("--local", "--resume"), "--resume needs --working-dir"),
    ]:
        proc = launch(str(exp), *args)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "b").exists()


def _fake_sbatch_env(tmp_path: Path) -> dict[str, str]:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\nexit 1\n")  # only its presence matters here
    (fake / "sbatch").chmod(0o755)
    return {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}


def test_dry_run_resolves_a_relative_image_and_hides_secret_overrides(tmp_path: Path) -> None:
    (tmp_path / "img.sif").write_bytes(b"not a SIF: the dry run's pre-flight says so")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mushin_box",
            "launch",
            str(EXP),
            "--image",
            "img.sif",
            "+api_token=abc123",
            "--slurm",
            "--dry-run",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_fake_sbatch_env(tmp_path),
        cwd=tmp_path,
    )
    # the review is printed in full, then the pre-flight's refusal: exit 2, as the launch
    assert proc.returncode == 2, proc.stderr
    got = json.loads(proc.stdout)
    assert f" {tmp_path / 'img.sif'} " in got["launcher_config"]["python"]
    assert "abc123" not in proc.stdout + proc.stderr
    assert "${oc.env:MUSHIN_SECRET_" in got["overrides"][0]
    assert got["overrides"][0].startswith("+api_token=")
    assert len(got["errors"]) == 1 and str(tmp_path / "img.sif") in got["errors"][0]
    assert proc.stderr.startswith("mushin-box launch: error: image pre-flight failed")

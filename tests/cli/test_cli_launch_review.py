# SPDX-License-Identifier: MIT
"""A launch you can trust before it costs GPU-hours: where it runs is decided by asking
the SLURM controller (not by ``sbatch`` being on PATH), flag conflicts are refused before
the experiment is imported, the dry run reviews (sbatch script, rank env file, cells,
GPU-hours, warnings), errors keep Hydra's reason and suggest the key meant, and a profile
reaches the submitted job."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import APPTAINER_STANDIN, standin_image
from test_cli_launch import EXP, launch
from test_cli_launch_refusals import WORKFLOW_EXP, assert_one_line_refusal, launch_env

# an experiment that must never be imported: a flag conflict is refused before it is
NOT_IMPORTED = "raise RuntimeError('the experiment was imported')\n"


def REAL_SLURM_CLIENT(test: Any) -> Any:  # noqa: N802  # a mark, spelled as one
    """sbatch and scontrol on PATH (installed with the local cluster): a ``slurm`` test."""
    return pytest.mark.slurm(pytest.mark.usefixtures("slurm_client")(test))


def down_cluster_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine with the SLURM client and no reachable cluster: a
    slurm.conf whose controller is down (a port nothing listens on)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=down\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nGresTypes=gpu\n"
        "MessageTimeout=1\n"  # sbatch gives up at once, not after its retries
    )
    return {**os.environ, "SLURM_CONF": str(conf), "COLUMNS": "200"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "2", "--local", "--dry-run"], "--nodes 2 needs SLURM (--local)"),
        (["--local", "--partition", "gpu"], "--partition configures a SLURM job"),
        (["--local", "--detach"], "--detach needs SLURM"),
        (["--local", "--image", "x.sif"], "mushin-box smoke"),
        (["--json"], "--json prints the dry run's review: add --dry-run"),
        (["--resume"], "--resume needs --working-dir"),
        (["--local", "--mem", "1G", "--mem-gb", "1"], "--mem and --mem-gb"),
        (["--local", "--profile", "nope", "--dry-run"], "--profile nope: no such profile"),
    ],
)
def test_flag_conflicts_are_refused_before_the_experiment_is_imported(
    tmp_path: Path, args: list[str], message: str
) -> None:
    exp = tmp_path / "never_exp.py"
    exp.write_text(NOT_IMPORTED)
    proc = launch(str(exp), *args, cwd=tmp_path)
    line = assert_one_line_refusal(proc, message)
    assert "imported" not in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--local", "--slurm"], "argument --slurm: not allowed with argument --local"),
        (["--time", "2h"], "argument --time: '2h' is not a SLURM time"),
        (["--mem", "1.5G"], "argument --mem: '1.5G' is not a SLURM memory size"),
    ],
)
def test_bad_flag_values_are_argparse_errors(tmp_path: Path, args: list[str], message: str) -> None:
    exp = tmp_path / "never_exp.py"
    exp.write_text(NOT_IMPORTED)
    proc = launch(str(exp), *args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_a_mistyped_key_gets_did_you_mean_and_hydras_reason_is_kept(tmp_path: Path) -> None:
    proc = launch(str(EXP), "--local", "--dry-run", "module.lrr=0.1", cwd=tmp_path)
    assert_one_line_refusal(proc, "override 'module.lrr=0.1'", "did you mean 'lr'?", "+module.lrr")
    # a value Hydra cannot merge: its reason, not only "Error merging override"
    proc = launch(str(EXP), "--local", "--no-progress", "trainer.max_epochs=abc", cwd=tmp_path)
    assert_one_line_refusal(
        proc,
        "Error merging override trainer.max_epochs=abc: Value 'abc' of type 'str' could not "
        "be converted to Integer",
    )
    assert not (tmp_path / "multirun").exists()  # refused before the sweep directory


@REAL_SLURM_CLIENT
def test_the_dry_run_reviews_a_two_node_image_launch(tmp_path: Path) -> None:
    image = standin_image(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{APPTAINER_STANDIN}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "200",
    }
    args = [str(EXP), "--nodes", "2", "--gpus", "4", "--image", str(image)]
    args += ["--image-python", sys.executable, "--slurm", "--dry-run", "module.lr=0.01,0.1"]
    work = tmp_path / "sweep"
    proc = launch_env(*args, "--working-dir", str(work), env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "warning: trainer.accelerator is 'cpu' (the experiment's config)" in out
    assert "GPU-hours   at most 16 = 2 cell(s) x 2 node(s) x 4 GPU(s) x 1:00:00" in out
    assert "#SBATCH --ntasks-per-node=4" in out and "#SBATCH --array=0-1" in out
    assert "#SBATCH --job-name=exp" in out
    # the env file as text (the pre-flight ran: the image's identity is in it), no blob
    env_file = out.split("--- the env file every rank reads: ")[1]
    assert env_file.startswith(str(work / ".mushin-box" / "apptainer-"))
    assert "MUSHIN_SIF_SHA256=" in env_file and "PYTHONPATH=" in env_file
    assert "<the env file shown below, " in out
    assert not re.search(r"[A-Za-z0-9+/=]{200}", out)  # no base64 blob
    assert not work.exists()  # a dry run writes nothing

    review = json.loads(launch_env(*args, "--json", env=env, cwd=tmp_path).stdout)
    assert review["cells"] == 2 and review["gpu_hours"] == 16.0
    assert review["sources"]["name"] == "default" and review["errors"] == []
    assert review["working_dir"].startswith(str(tmp_path / "multirun" / ""))  # the default
    assert not (tmp_path / "multirun").exists()


def test_one_cpu_a_rank_is_warned_of_only_when_nobody_chose_it(tmp_path: Path) -> None:
    args = [str(EXP), "--slurm", "--dry-run", "--json", "--working-dir", str(tmp_path / "w")]
    warned = [
        any("cpus_per_task=1" in w for w in json.loads(launch(*args, *more).stdout)["warnings"])
        for more in ([], ["--cpus-per-task", "1"])
    ]
    assert warned == [True, False]  # the default, then the user's own choice


@REAL_SLURM_CLIENT
def test_pre_flight_runs_in_the_dry_run(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sif"
    env = {**os.environ, "COLUMNS": "200"}
    proc = launch_env(
        str(EXP), "--image", str(missing), "--slurm", "--dry-run", env=env, cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert "--- the sbatch script" in proc.stdout  # the review first, then the refusal
    assert "mushin-box launch: error: image pre-flight failed" in proc.stderr


@REAL_SLURM_CLIENT
@pytest.mark.slow
def test_no_reachable_cluster_runs_here_and_says_why(tmp_path: Path) -> None:
    exp = tmp_path / "wf_exp.py"
    exp.write_text(WORKFLOW_EXP)
    env = down_cluster_env(tmp_path)
    proc = launch_env(str(exp), "--no-progress", "x=2", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    banner = proc.stderr.splitlines()[0]
    assert banner.startswith(f"[mushin-box launch] {exp} on here, 1 CPU rank(s) (")
    assert "no SLURM cluster reachable: scontrol ping: " in banner and "--slurm" in banner
    # insisting on SLURM: sbatch's own line and the fix; exit 2, nothing left behind
    shutil.rmtree(tmp_path / "multirun")
    proc = launch_env(str(exp), "--slurm", "--no-progress", "x=2", env=env, cwd=tmp_path)
    assert_one_line_refusal(proc, "sbatch refused the job: ", "SLURM_CONF", "--local")
    assert not (tmp_path / "multirun").exists()


@pytest.mark.slurm
@pytest.mark.slow
def test_a_profile_reaches_the_submitted_job_and_a_flag_overrides_it(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    exp = tmp_path / "wf_exp.py"
    exp.write_text(WORKFLOW_EXP)
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.mushin-box.profiles.default]\npartition = {slurm_cluster.partition!r}\n"
        'time = "0:07:00"\n\n[tool.mushin-box.profiles.other]\ntime = 3\n'
    )

    def submitted(*args: str) -> dict[str, str]:
        proc = launch(str(exp), "--detach", "--no-progress", *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        job = re.search(r"submitted 1 job\(s\): (\S+)", proc.stdout)
        assert job is not None, proc.stdout
        work = re.search(r"sweep: (\S+)", proc.stdout)
        assert work is not None
        shown = subprocess.run(
            ["scontrol", "show", "job", "-o", job[1]], capture_output=True, text=True, timeout=30
        ).stdout
        subprocess.run(
            [sys.executable, "-m", "mushin_box", "cancel", work[1]],
            capture_output=True,
            timeout=120,
        )
        return dict(re.findall(r"(\w+)=(\S*)", shown))

    job = submitted("x=1", "--working-dir", str(tmp_path / "a"))
    assert (job["Partition"], job["JobName"], job["TimeLimit"]) == (
        slurm_cluster.partition,
        "wf_exp",
        "00:07:00",
    )
    job = submitted("x=2", "--working-dir", str(tmp_path / "b"), "--time", "1:30:00", "--mem", "2G")
    assert (job["TimeLimit"], job["MinMemoryNode"]) == ("01:30:00", "2G")
    # a hydra.launcher override reaches the job too, checked like a flag
    job = submitted(
        "x=3",
        "--working-dir",
        str(tmp_path / "c"),
        "--profile",
        "other",
        "hydra.launcher.comment=from-an-override",
    )
    assert job["TimeLimit"] == "00:03:00" and job["JobName"] == "wf_exp"
    assert job["Comment"] == "from-an-override"

# SPDX-License-Identifier: MIT
"""The experiment's own repository is recorded, checked and found again by reproduce."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mushin_box._core.sidecars import read_json
from mushin_box._provenance.record import git_state

EXP = """
import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import HydraDDP, MetricsCallback
from mushin_box.testing import TinyDataModule, TinyModule

Config = make_config(
    seed=3,
    trainer=builds(
        pl.Trainer, accelerator="cpu", max_epochs=1, strategy=builds(HydraDDP),
        callbacks=[builds(MetricsCallback)], default_root_dir="${hydra:runtime.output_dir}",
        logger=False, enable_progress_bar=False, enable_model_summary=False,
    ),
    module=builds(TinyModule, lr=0.05),
    datamodule=builds(TinyDataModule, global_batch_size=16),
)
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
        cwd=repo, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "my-project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "user_repo_exp.py").write_text(EXP)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "experiment")
    return repo


def test_an_untracked_file_the_code_runs_makes_the_tree_dirty(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    clean = git_state(repo / "user_repo_exp.py")
    assert clean is not None and clean["dirty"] is False and clean["diff_sha256"] is None
    helper = repo / "helpers.py"
    helper.write_text("SCALE = 2\n")
    assert git_state(repo / "user_repo_exp.py") == clean  # not imported: not the code's
    with_it = git_state(repo / "user_repo_exp.py", include=[helper])
    assert with_it is not None and with_it["dirty"] is True and with_it["diff_sha256"]
    helper.write_text("SCALE = 3\n")  # its content counts
    assert git_state(repo / "user_repo_exp.py", include=[helper]) != with_it


@pytest.mark.slow
def test_a_launch_records_the_experiments_repository_and_reproduces_from_anywhere(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    head = _git(repo, "rev-parse", "HEAD")
    cli = [sys.executable, "-m", "mushin_box"]
    runs = tmp_path / "runs"
    launched = subprocess.run(
        [*cli, "launch", "user_repo_exp.py", "--local", "--gpus", "1", "--no-progress",
         "--working-dir", str(runs / "a")],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-2000:]
    record = read_json(runs / "a" / "cell" / "mushin_provenance.json")
    # the user's repository, not mushin-box's (the task is the kit's fit_task)
    assert record["reproducibility"]["code"]["git"] == {
        "commit": head,
        "dirty": False,
        "diff_sha256": None,
    }
    assert record["run"]["experiment"]["file"] == str(repo / "user_repo_exp.py")
    # show and report name the experiment and its commit
    shown = subprocess.run([*cli, "show", str(runs / "a"), "--md"], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert f"experiment {repo / 'user_repo_exp.py'}, code {head[:12]}" in shown.stdout
    table = subprocess.run([*cli, "show", str(runs / "a")], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "COLUMNS": "400"})  # fmt: skip
    assert f"experiment {repo / 'user_repo_exp.py'}, code {head[:12]}" in table.stdout
    shown_json = subprocess.run([*cli, "show", str(runs / "a"), "--json"],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
    assert head[:12] in json.loads(shown_json.stdout)["code"]
    page = tmp_path / "report.html"
    subprocess.run([*cli, "report", str(runs / "a"), "-o", str(page)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    html = page.read_text()
    assert head[:12] in html and "user_repo_exp.py" in html
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(
        [*cli, "reproduce", str(runs / "a" / "cell"), "--local", "--into", str(runs / "b"),
         "--json"],
        cwd=elsewhere, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    result = json.loads(again.stdout)
    assert result["ok"] is True and result["plan"]["code"]["same"] is True
    # a commit after the run: reproduce names both commits and refuses
    (repo / "user_repo_exp.py").write_text(EXP.replace("lr=0.05", "lr=0.5"))
    _git(repo, "commit", "-q", "-am", "another lr")
    refused = subprocess.run(
        [*cli, "reproduce", str(runs / "a" / "cell"), "--local", "--dry-run"],
        cwd=elsewhere, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert refused.returncode == 2 and head in refused.stderr

# SPDX-License-Identifier: MIT
"""Every source of an sbatch option passes one check (issue 29, item 4): ``--sbatch``, a
profile's ``sbatch`` table and ``hydra.launcher.additional_parameters`` are refused alike,
naming the source, the option and the one place that sets it, before anything is written
(the Python side, ``submitit_slurm_config``/the launcher/``Workflow.run``, is in
``tests/slurm/test_one_sbatch_check.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from mushin_box._launch.options import OptionError, resolve_options
from mushin_box._launch.schedule import (
    ScheduleError,
    slurm_launcher_config,
    split_launcher_overrides,
)
from mushin_box._slurm.config import check_sbatch_option

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

EXP = REPO / "examples" / "exp.py"

#: an option a user's table may not set, a value, and what the refusal must name as the fix
REFUSED = [
    ("partition", "other", "--partition"),  # the review would show one, the script the other
    ("time", "10:00:00", "--time"),  # GPU-hours and the requeue trap read --time
    ("array", "0-999", "array_parallelism"),  # the kit owns the array
    ("job-name", "second", "--job-name"),
    ("job_name", "second", "--job-name"),  # submitit writes it as --job-name
    ("output", "/tmp/elsewhere.log", "mushin-box logs"),
    ("error", "/tmp/elsewhere.err", "mushin-box logs"),
    ("arr", "0-9", "array_parallelism"),  # sbatch reads a prefix as the whole option
]


def reason(option: str, value: str) -> str:
    """The refusal of the one check, after the part that names the source."""
    with pytest.raises(ValueError) as info:
        check_sbatch_option(option, value, where="SOURCE")
    message = str(info.value)
    assert message.startswith("SOURCE: ")
    return message.removeprefix("SOURCE: ")


def profile_dir(tmp_path: Path, option: str, value: str) -> Path:
    (tmp_path / "mushin-box.toml").write_text(
        f'[profiles.default]\npartition = "gpu"\nsbatch = {{{option} = "{value}"}}\n'
    )
    return tmp_path


@pytest.mark.parametrize(("option", "value", "fix"), REFUSED)
def test_every_source_is_refused_with_the_same_reason(
    tmp_path: Path, option: str, value: str, fix: str
) -> None:
    said = reason(option, value)
    assert fix in said and "\n" not in said

    with pytest.raises(OptionError) as flag:  # --sbatch KEY=VALUE
        resolve_options({"sbatch": [f"{option}={value}"]}, None, default_name="e", cwd=tmp_path)
    assert str(flag.value) == f"--sbatch '{option}={value}': {said}"

    with pytest.raises(OptionError) as table:  # the profile's sbatch table
        resolve_options({}, None, default_name="e", cwd=profile_dir(tmp_path, option, value))
    assert str(table.value) == (
        f"{tmp_path / 'mushin-box.toml'}: profile default: sbatch.{option}: {said}"
    )

    override = f"hydra.launcher.additional_parameters.{option}={value}"
    _, settings = split_launcher_overrides([override])
    with pytest.raises(ScheduleError) as hydra:  # hydra.launcher.additional_parameters
        slurm_launcher_config(nodes=1, gpus=2, settings=settings)
    assert str(hydra.value) == (f"override {override}: additional_parameters[{option!r}]: {said}")


def test_the_source_named_is_the_options_own(tmp_path: Path) -> None:
    # --mem under a GB is an sbatch option too: an override beside it is named alone
    opts = resolve_options({"mem": 500}, None, default_name="e", cwd=tmp_path)
    override = "hydra.launcher.additional_parameters.array=0-9"
    _, settings = split_launcher_overrides([override], opts.slurm)
    with pytest.raises(ScheduleError, match=rf"^override {override}: ") as info:
        slurm_launcher_config(nodes=1, gpus=1, settings=settings)
    assert "--mem" not in str(info.value)


@pytest.mark.parametrize(
    "pairs", [["mail-type=END"], ["mail-type=END", "requeue"], ["begin=now+1hour"]]
)
def test_other_sbatch_options_still_pass(tmp_path: Path, pairs: list[str]) -> None:
    opts = resolve_options({"sbatch": pairs}, None, default_name="e", cwd=tmp_path)
    assert set(opts.slurm.additional_parameters) == {p.partition("=")[0] for p in pairs}


def test_mem_in_a_table_points_at_the_mem_key(tmp_path: Path) -> None:
    # --mem under a GB becomes sbatch's --mem, so a table's mem would be a second value
    with pytest.raises(OptionError, match=r"--sbatch 'mem=1G': .* set by --mem"):
        resolve_options({"sbatch": ["mem=1G"]}, None, default_name="e", cwd=tmp_path)
    with pytest.raises(
        OptionError,
        match=r"profile default: sbatch.mem: sbatch's --mem is set by the profile's mem key",
    ):
        resolve_options({}, None, default_name="e", cwd=profile_dir(tmp_path, "mem", "1G"))


def launch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", str(EXP), "--slurm", "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.parametrize(
    ("how", "needles"),
    [
        ("profile", ("profile default: sbatch.partition: ", "--partition")),
        ("override", ("override hydra.launcher.additional_parameters.time=", "--time")),
    ],
)
def test_a_dry_run_refuses_in_one_line_exit_2_writing_nothing(
    tmp_path: Path, how: str, needles: tuple[str, ...]
) -> None:
    args: list[Any] = ["--partition", "gpu", "--working-dir", str(tmp_path / "sweep")]
    if how == "profile":  # the review would show --partition gpu, the script partition other
        profile_dir(tmp_path, "partition", "other")
    else:
        args.append("hydra.launcher.additional_parameters.time=10:00:00")
    proc = launch(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "#SBATCH" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mushin-box launch: error: "), proc.stderr
    assert all(needle in lines[0] for needle in needles), lines[0]
    assert not (tmp_path / "sweep").exists()

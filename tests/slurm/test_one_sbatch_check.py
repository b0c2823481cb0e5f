# SPDX-License-Identifier: MIT
"""From Python, sbatch options pass the same check as on the command line (issue 29,
item 4): ``submitit_slurm_config(additional_parameters=)``, the ``mushin_slurm`` launcher's
own config and ``Workflow.run(launcher_config=)`` raise ValueError with the one check's
text, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from mushin_box._slurm.config import check_sbatch_option, submitit_slurm_config
from mushin_box._slurm.launcher import SubmititCellLauncher, render_sbatch

REFUSED = [
    ("partition", "other"),
    ("time", "10:00:00"),
    ("array", "0-999"),
    ("job-name", "second"),
    ("output", "/tmp/elsewhere.log"),
    ("error", "/tmp/elsewhere.err"),
    ("signal", "B:USR1@60"),
    ("open_mode", "truncate"),
    ("ntasks", "3"),
]


def said(option: str, value: str) -> str:
    with pytest.raises(ValueError) as info:
        check_sbatch_option(option, value, where=f"additional_parameters[{option!r}]")
    return str(info.value)


def task(x: int = 1) -> dict[str, float]:
    return {"y": float(x)}


@pytest.mark.parametrize(("option", "value"), REFUSED)
def test_python_sources_raise_the_one_checks_text(tmp_path: Path, option: str, value: str) -> None:
    from mushin_box import Workflow

    expected = said(option, value)
    extra = {option: value}
    with pytest.raises(ValueError) as built:
        submitit_slurm_config(nodes=1, gpus_per_node=2, additional_parameters=extra)
    assert str(built.value) == expected
    with pytest.raises(ValueError) as launcher:
        SubmititCellLauncher("slurm", {"additional_parameters": extra})
    assert str(launcher.value) == expected
    work = tmp_path / "sweep"
    with pytest.raises(ValueError) as run:
        Workflow(task).run(
            working_dir=work,
            launcher="mushin_slurm",
            launcher_config={"additional_parameters": extra},
        )
    assert str(run.value) == expected
    assert not work.exists()  # refused before the sweep directory was made


def test_allowed_options_reach_the_script_once(tmp_path: Path) -> None:
    config = submitit_slurm_config(
        nodes=1,
        gpus_per_node=1,
        timeout_min=30,
        additional_parameters={"mail-type": "END", "mem": "500M"},
    )
    text = render_sbatch(config, tmp_path / "%j", map_count=2)
    assert "#SBATCH --mail-type=END" in text and "#SBATCH --mem=500M" in text
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    for option in ("time", "array", "job-name", "output", "error", "signal"):
        assert sum(line.startswith(f"#SBATCH --{option}=") for line in sbatch) == 1, option
    assert "#SBATCH --time=30" in sbatch

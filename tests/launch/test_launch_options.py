# SPDX-License-Identifier: MIT
"""What a launch's scheduler settings are, and where each came from: profiles
(``pyproject.toml``/``mushin-box.toml``), flags over them, ``hydra.launcher.*`` overrides
over both, each value checked with its source named; and the checks that need no
experiment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import run_doctests

import mushin_box._launch.options
import mushin_box._launch.schedule
from mushin_box._launch.options import (
    OptionError,
    check_where,
    experiment_name,
    load_profile,
    resolve_options,
)
from mushin_box._launch.schedule import (
    ScheduleError,
    slurm_launcher_config,
    split_launcher_overrides,
)
from mushin_box._slurm.config import SlurmSettings

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

PYPROJECT = """
[project]
name = "demo"

[tool.mushin-box.profiles.default]
partition = "gpu"
account = "proj42"
time = "2:00:00"
cpus-per-task = 8
mem = "64G"
image = "images/train.sif"
bind = ["/data:/data:ro"]
sbatch = {mail-type = "END"}

[tool.mushin-box.profiles.long]
partition = "gpu-long"
time = "2-00:00:00"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "sub").mkdir()
    return tmp_path


def resolve(flags: dict[str, Any], profile: str | None, cwd: Path) -> Any:
    return resolve_options(flags, profile, default_name="exp", cwd=cwd)


def test_the_default_profile_applies_and_the_plan_says_where_from(project: Path) -> None:
    opts = resolve({}, None, project / "sub")  # found from a subdirectory, as pip finds it
    assert opts.slurm.given() == {
        "partition": "gpu",
        "account": "proj42",
        "name": "exp",
        "timeout_min": 120,
        "cpus_per_task": 8,
        "mem_gb": 64,
        "additional_parameters": {"mail-type": "END"},
    }
    source = f"profile default ({project / 'pyproject.toml'})"
    assert opts.slurm.sources["partition"] == source and opts.slurm.sources["name"] == "default"
    assert opts.slurm.sources["additional_parameters.mail-type"] == source
    assert opts.image == str(project / "images" / "train.sif")  # relative to the file
    assert opts.binds == ("/data:/data:ro",) and opts.explicit == ()


def test_flags_win_over_the_named_profile(project: Path) -> None:
    flags = {"time": 90, "mem": 2048, "bind": ["/scratch"], "sbatch": ["mail-type=FAIL"]}
    opts = resolve(flags, "long", project)
    assert opts.slurm.partition == "gpu-long" and opts.slurm.timeout_min == 90
    assert opts.slurm.sources["timeout_min"] == "--time" and opts.slurm.mem_gb == 2
    assert opts.slurm.additional_parameters == {"mail-type": "FAIL"}
    assert opts.binds == ("/scratch",) and opts.slurm.account is None  # long has none
    assert opts.explicit == ("--time", "--mem", "--sbatch", "--bind")


def test_no_project_no_profile(tmp_path: Path) -> None:
    opts = resolve({}, None, tmp_path)
    assert opts.profile is None and opts.slurm.given() == {
        "name": "exp",
        "timeout_min": 60,
        "cpus_per_task": 1,
    }


def test_mushin_box_toml_beside_pyproject(tmp_path: Path) -> None:
    (tmp_path / "mushin-box.toml").write_text('[profiles.a100]\nconstraint = "a100"\n')
    assert load_profile("a100", tmp_path).values == {"constraint": "a100"}  # type: ignore[union-attr]
    (tmp_path / "pyproject.toml").write_text('[tool.mushin-box.profiles.a100]\nqos = "x"\n')
    with pytest.raises(ValueError, match="defined in both"):
        load_profile("a100", tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[tool.mushin-box.profiles.default]\nbinds = ["/d"]\n', "did you mean 'bind'?"),
        ("[tool.mushin-box.profiles.default]\ncpus = 8\n", "did you mean 'cpus-per-task'?"),
        ("[tool.mushin-box.profiles.default]\npartiton = 'gpu'\n", "did you mean 'partition'?"),
        ("[tool.mushin-box.profiles.default]\ntime = '2h'\n", "time must be minutes or a SLURM"),
        ("[tool.mushin-box.profiles.default]\nmem = 64\n", "with a unit, e.g. '64G'"),
        ("[tool.mushin-box.profiles.default]\ncpus-per-task = 0\n", "a positive integer"),
        ("[tool.mushin-box.profiles]\ndefault = 1\n", "one table per profile"),
        ("[tool.mushin-box.profiles.default\n", "cannot be read"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(OptionError, match=message) as info:
        resolve({}, None, tmp_path)
    assert str(tmp_path / "pyproject.toml") in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_profile_lists_the_known(project: Path) -> None:
    with pytest.raises(OptionError, match=r"--profile lng: .*did you mean 'long'\?.*default"):
        resolve({}, "lng", project)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"mem": 1024, "mem_gb": 1}, "--mem and --mem-gb"),
        ({"sbatch": ["partition=gpu"]}, "set by --partition"),
        ({"sbatch": ["=x"]}, "give KEY=VALUE"),
    ],
)
def test_flag_conflicts(tmp_path: Path, flags: dict[str, Any], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        resolve(flags, None, tmp_path)


def test_here_refuses_what_only_slurm_can_run(project: Path) -> None:
    profile_only = resolve({}, None, project)  # a profile's SLURM values: just not used here
    check_where(profile_only, local=True, why="--local", nodes=1, image_flag=False, detach=False)
    flagged = resolve({"partition": "debug", "time": 5}, None, project)
    with pytest.raises(OptionError, match=r"--partition, --time configure a SLURM job"):
        check_where(flagged, local=True, why="--local", nodes=1, image_flag=False, detach=False)
    for kwargs, message in [
        ({"nodes": 2}, r"--nodes 2 needs SLURM \(no cluster\)"),
        ({"image_flag": True}, "mushin-box smoke"),
        ({"detach": True}, "--detach needs SLURM"),
    ]:
        with pytest.raises(OptionError, match=message):
            check_where(
                profile_only,
                **{"local": True, "why": "no cluster", "nodes": 1, "image_flag": False}
                | {"detach": False}
                | kwargs,
            )


def test_the_default_job_name_is_the_experiments() -> None:
    assert experiment_name("examples/exp.py") == "exp"
    assert experiment_name("exp.py:Big") == "exp-Big"
    assert experiment_name("pkg.experiments.vision:Config") == "vision-Config"


# ------------------------------------------------------------------ hydra.launcher overrides


def test_launcher_overrides_leave_the_task_overrides_and_keep_their_source() -> None:
    rest, settings = split_launcher_overrides(
        ["lr=0.1", "hydra.launcher.qos=high", "hydra.launcher.timeout_min=30"]
    )
    assert rest == ["lr=0.1"] and settings.given() == {"qos": "high", "timeout_min": 30}
    assert settings.sources["qos"] == "override hydra.launcher.qos=high"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hydra.launcher.qoss=high", "did you mean hydra.launcher.qos?"),
        ("hydra.launcher.qos=a,b", "cannot be swept"),
        ("hydra.launcher.nodes=3", "--nodes sets nodes"),
        ("hydra.launcher.tasks_per_node=3", "--gpus sets tasks_per_node"),
        ("hydra/launcher=submitit_slurm", "launch chooses the launcher"),
        ("hydra.launcher.python=python3", "written by --image"),
        ("~hydra.launcher.qos", "cannot be deleted"),
    ],
)
def test_launcher_overrides_refused(override: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        split_launcher_overrides([override])


def test_each_value_is_checked_and_named_by_its_source() -> None:
    partition = SlurmSettings().merged({"partition": "a\nb"}, "--partition")
    requeues = SlurmSettings().merged(
        {"max_requeues": -1}, "override hydra.launcher.max_requeues=-1"
    )
    with pytest.raises(ScheduleError, match=r"^--partition: partition='a\\nb': a control"):
        slurm_launcher_config(nodes=1, gpus=1, settings=partition)
    with pytest.raises(ScheduleError, match=r"^override hydra.launcher.max_requeues=-1: "):
        slurm_launcher_config(nodes=1, gpus=1, settings=requeues)
    _, found = split_launcher_overrides(["hydra.launcher.additional_parameters.signal=X"])
    with pytest.raises(ScheduleError, match="set signal_delay_s instead"):
        slurm_launcher_config(nodes=1, gpus=1, settings=found)
    config = slurm_launcher_config(
        nodes=2, gpus=4, settings=SlurmSettings(qos="high", requeue_on=["timeout"])
    )
    assert config["qos"] == "high" and config["requeue_on"] == ["timeout"]


def test_doctests() -> None:
    for module in (
        mushin_box._launch.options,
        mushin_box._launch.schedule,
    ):
        assert run_doctests(module).failed == 0, module.__name__

# SPDX-License-Identifier: MIT
"""submitit_slurm_config: hydra-submitit-launcher configs with one rank per GPU."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import APPTAINER_STANDIN, REPO, run_doctests
from hypothesis import assume, given
from hypothesis import strategies as st

import mushin_box._slurm.config
from mushin_box._slurm.config import SLURM_LAUNCHER_KEYS, submitit_slurm_config

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

# Fields of hydra-submitit-launcher 1.2.0's SlurmQueueConf (incl. BaseQueueConf), from its
# hydra_plugins/hydra_submitit_launcher/config.py. The plugin is not a dependency.
SLURM_QUEUE_CONF_1_2_0 = frozenset(
    {
        "submitit_folder",
        "timeout_min",
        "cpus_per_task",
        "gpus_per_node",
        "tasks_per_node",
        "mem_gb",
        "nodes",
        "name",
        "stderr_to_stdout",
        "_target_",
        "partition",
        "qos",
        "comment",
        "constraint",
        "exclude",
        "gres",
        "cpus_per_gpu",
        "gpus_per_task",
        "mem_per_gpu",
        "mem_per_cpu",
        "account",
        "signal_delay_s",
        "max_num_timeout",
        "additional_parameters",
        "array_parallelism",
        "setup",
    }
)

INT_PARAMETERS = ("nodes", "gpus_per_node", "cpus_per_task", "timeout_min")


def test_minimal_config() -> None:
    assert submitit_slurm_config(nodes=2, gpus_per_node=4) == {
        "nodes": 2,
        "tasks_per_node": 4,
        "gpus_per_node": 4,
        "cpus_per_task": 1,
        "timeout_min": 60,
    }


def test_all_explicit_parameters() -> None:
    config = submitit_slurm_config(
        nodes=1,
        gpus_per_node=8,
        cpus_per_task=6,
        partition="gpu",
        account="proj",
        timeout_min=240,
        mem_gb=128,
    )
    assert config == {
        "nodes": 1,
        "tasks_per_node": 8,
        "gpus_per_node": 8,
        "cpus_per_task": 6,
        "timeout_min": 240,
        "partition": "gpu",
        "account": "proj",
        "mem_gb": 128,
    }


def test_none_valued_optional_keys_are_omitted() -> None:
    config = submitit_slurm_config(
        nodes=1, gpus_per_node=1, partition=None, account=None, mem_gb=None, qos=None, setup=None
    )
    assert set(config) == {
        "nodes",
        "tasks_per_node",
        "gpus_per_node",
        "cpus_per_task",
        "timeout_min",
    }


def test_extra_launcher_fields_pass_through() -> None:
    setup = ["module load cuda"]
    sbatch = {"mail-type": "END"}
    config = submitit_slurm_config(
        nodes=1,
        gpus_per_node=2,
        qos="high",
        constraint="a100",
        exclude="node7",
        comment="sweep",
        gres="tmpspace:10G",
        mem_per_cpu="4G",
        signal_delay_s=0,
        max_num_timeout=3,
        array_parallelism=4,
        name="train",
        stderr_to_stdout=True,
        setup=setup,
        additional_parameters=sbatch,
        submitit_folder="/scratch/runs/%j",
    )
    assert config["qos"] == "high" and config["signal_delay_s"] == 0
    assert config["setup"] == setup and config["setup"] is not setup
    assert config["additional_parameters"] == sbatch
    assert config["additional_parameters"] is not sbatch
    assert set(config) <= set(SLURM_LAUNCHER_KEYS)


def test_keys_are_fields_of_the_stock_launcher() -> None:
    assert set(SLURM_LAUNCHER_KEYS) <= SLURM_QUEUE_CONF_1_2_0
    assert SLURM_QUEUE_CONF_1_2_0 - set(SLURM_LAUNCHER_KEYS) == {
        "_target_",
        "cpus_per_gpu",
        "gpus_per_task",
    }


def test_every_key_it_returns_is_typed() -> None:
    from mushin_box._slurm.config import SubmititSlurmConfig

    required = SubmititSlurmConfig.__required_keys__
    typed = required | SubmititSlurmConfig.__optional_keys__
    assert required == {"nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "timeout_min"}
    assert set(SLURM_LAUNCHER_KEYS) <= typed
    everything = submitit_slurm_config(
        nodes=2, gpus_per_node=4, image="/i.sif", preflight=False, torchrun=True, min_nodes=1
    )
    assert isinstance(everything, dict) and set(everything) <= typed


def test_merges_into_the_real_launcher_config_when_installed() -> None:
    launcher = pytest.importorskip("hydra_plugins.hydra_submitit_launcher.config")
    from omegaconf import OmegaConf

    fields = {f.name for f in dataclasses.fields(launcher.SlurmQueueConf)}
    assert fields >= SLURM_QUEUE_CONF_1_2_0
    config = submitit_slurm_config(
        nodes=2, gpus_per_node=4, mem_gb=16.0, partition="p", setup=["echo hi"]
    )
    merged = OmegaConf.merge(OmegaConf.structured(launcher.SlurmQueueConf), config)
    assert merged.tasks_per_node == 4 and merged.mem_gb == 16


def test_explicit_tasks_per_node_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="derived") as raised:
        submitit_slurm_config(nodes=1, gpus_per_node=2, tasks_per_node=2)
    assert "gpus_per_node" in str(raised.value) and "drop tasks_per_node" in str(raised.value)


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("partiton", "partition"), ("gpu_per_node", "gpus_per_node"), ("qso", "qos")],
)
def test_unknown_key_suggests_the_closest_and_lists_valid_keys(key: str, suggestion: str) -> None:
    extra: dict[str, Any] = {key: "x"}
    with pytest.raises(ValueError, match=f"did you mean '{suggestion}'") as raised:
        submitit_slurm_config(nodes=1, gpus_per_node=1, **extra)
    message = str(raised.value)
    assert "valid keys:" in message
    assert all(k in message for k in SLURM_LAUNCHER_KEYS if k != "tasks_per_node")


def test_unknown_key_without_a_close_match() -> None:
    with pytest.raises(ValueError, match="unknown submitit launcher key 'zzzz'; valid keys"):
        submitit_slurm_config(nodes=1, gpus_per_node=1, zzzz=1)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("cpus_per_gpu", "cpus_per_task"),
        ("gpus_per_task", "gpus_per_node"),
        ("srun_args", "1.2.0"),
        ("python", "1.2.0"),
    ],
)
def test_refused_keys_explain_why(key: str, reason: str) -> None:
    extra: dict[str, Any] = {key: 1}
    with pytest.raises(ValueError, match=reason):
        submitit_slurm_config(nodes=1, gpus_per_node=1, **extra)


@pytest.mark.parametrize("parameter", INT_PARAMETERS)
@pytest.mark.parametrize("bad", [0, -1, True, False, 1.0, "2", None])
def test_int_parameters_are_validated(parameter: str, bad: object) -> None:
    kwargs: dict[str, Any] = {"nodes": 1, "gpus_per_node": 1, parameter: bad}
    with pytest.raises(ValueError, match=parameter):
        submitit_slurm_config(**kwargs)


def test_mem_gb() -> None:
    assert submitit_slurm_config(nodes=1, gpus_per_node=1, mem_gb=8)["mem_gb"] == 8
    whole = submitit_slurm_config(nodes=1, gpus_per_node=1, mem_gb=8.0)["mem_gb"]
    assert whole == 8 and isinstance(whole, int)  # the launcher declares an int
    with pytest.raises(ValueError, match="mem_per_cpu='1536M'"):
        submitit_slurm_config(nodes=1, gpus_per_node=1, mem_gb=1.5)


@pytest.mark.parametrize("bad", [0, -4, 0.0, math.nan, math.inf, True, "8G"])
def test_bad_mem_gb(bad: object) -> None:
    with pytest.raises(ValueError, match="mem_gb"):
        submitit_slurm_config(nodes=1, gpus_per_node=1, mem_gb=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mem_gb": 8, "mem_per_cpu": "1G"},
        {"mem_per_cpu": "1G", "mem_per_gpu": "8G"},
    ],
)
def test_memory_options_are_mutually_exclusive(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="mutually exclusive"):
        submitit_slurm_config(nodes=1, gpus_per_node=1, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"partition": ""},
        {"account": 3},
        {"qos": ["high"]},
        {"stderr_to_stdout": "yes"},
        {"signal_delay_s": -1},
        {"max_num_timeout": True},
        {"array_parallelism": 0},
        {"setup": "echo hi"},
        {"setup": ["echo hi", 3]},
        {"additional_parameters": ["mail-type=END"]},
        {"gres": "gpu:2"},
        {"additional_parameters": {"ntasks-per-node": 1}},
        {"additional_parameters": {"ntasks_per_node": 1}},
        {"additional_parameters": {"gpus": 8}},
    ],
)
def test_bad_optional_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        submitit_slurm_config(nodes=1, gpus_per_node=1, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"partition": "gpu\nrm -rf ~"},
        {"account": "proj\rx"},
        {"qos": "high\x00"},
        {"name": "a\x0bb"},
        {"comment": "\x1b[2J"},
        {"constraint": "a\x7fb"},
        {"mem_per_cpu": "4G\u0085"},
        {"submitit_folder": "/runs\n/%j"},
        {"additional_parameters": {"mail-user": "me@x\nrm -rf ~"}},
    ],
)
def test_control_characters_cannot_reach_the_sbatch_script(kwargs: dict[str, Any]) -> None:
    # a newline would end the #SBATCH line and make the rest a shell command
    with pytest.raises(ValueError, match=f"{next(iter(kwargs))}.*control character"):
        submitit_slurm_config(nodes=1, gpus_per_node=1, **kwargs)


def test_values_reach_the_sbatch_script_shell_quoted(tmp_path: Any) -> None:
    from mushin_box._slurm.launcher import render_sbatch

    odd = "gpu part;touch pwned\tx"  # a tab is allowed: quoted, it stays on its line
    config = submitit_slurm_config(
        nodes=1, gpus_per_node=1, partition=odd, account="$(id)", comment="it's"
    )
    text = render_sbatch(config, tmp_path)
    assert "#SBATCH --partition='gpu part;touch pwned\tx'" in text
    assert "#SBATCH --account='$(id)'" in text
    assert "#SBATCH --comment='it'\"'\"'s'" in text


def test_docstring_example_runs() -> None:
    result = run_doctests(mushin_box._slurm.config)
    assert result.attempted >= 3 and result.failed == 0


def test_import_is_lazy() -> None:
    code = (
        "import sys, mushin_box._slurm.config; "
        "print(sorted(m for m in ('torch', 'pytorch_lightning', 'lightning', 'submitit', "
        "'hydra', 'omegaconf') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "[]"


positive = st.integers(min_value=1, max_value=10_000)


@given(nodes=positive, gpus=positive, cpus=positive, minutes=positive)
def test_tasks_per_node_always_equals_gpus_per_node(
    nodes: int, gpus: int, cpus: int, minutes: int
) -> None:
    config = submitit_slurm_config(
        nodes=nodes, gpus_per_node=gpus, cpus_per_task=cpus, timeout_min=minutes
    )
    assert config["tasks_per_node"] == config["gpus_per_node"] == gpus
    assert (config["nodes"], config["cpus_per_task"], config["timeout_min"]) == (
        nodes,
        cpus,
        minutes,
    )


bad_int = st.one_of(
    st.integers(max_value=0),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@given(parameter=st.sampled_from(INT_PARAMETERS), bad=bad_int)
def test_bad_int_values_always_raise(parameter: str, bad: object) -> None:
    kwargs: dict[str, Any] = {"nodes": 1, "gpus_per_node": 1, parameter: bad}
    with pytest.raises(ValueError, match=parameter):
        submitit_slurm_config(**kwargs)


@given(key=st.from_regex(r"[a-z_]{1,20}", fullmatch=True))
def test_any_other_key_raises(key: str) -> None:
    assume(key not in SLURM_LAUNCHER_KEYS or key == "tasks_per_node")
    extra: dict[str, Any] = {key: None}
    with pytest.raises(ValueError, match=key):
        submitit_slurm_config(nodes=1, gpus_per_node=1, **extra)


def _fake_sinfo(tmp_path: Path, gres: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\nprintf '%s\\n' '{gres}'\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize(("gres", "warned"), [("(null)", True), ("gpu:4", False)])
def test_nv_on_a_partition_without_gpus_is_a_preflight_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gres: str, warned: bool
) -> None:
    # a real runtime binds 14 host GL/EGL libraries there and says nothing
    import warnings

    from conftest import standin_image

    from mushin_box._container.preflight import PreflightWarning
    from mushin_box._slurm.config import submitit_slurm_config

    image = standin_image(tmp_path)
    _fake_sinfo(tmp_path, gres, monkeypatch)
    monkeypatch.setenv("PATH", f"{APPTAINER_STANDIN}{os.pathsep}{os.environ['PATH']}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        submitit_slurm_config(
            nodes=1, gpus_per_node=1, partition="cpu", image=image, working_dir=tmp_path
        )
    said = [str(w.message) for w in caught if issubclass(w.category, PreflightWarning)]
    nv = [m for m in said if m.startswith("--nv on partition cpu")]
    assert bool(nv) is warned, said

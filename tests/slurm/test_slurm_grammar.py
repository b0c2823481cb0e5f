# SPDX-License-Identifier: MIT
"""SLURM's ``--time`` and ``--mem`` grammars (``parse_slurm_time``, ``parse_slurm_memory``,
``memory_fields``), and the probe that decides whether a SLURM cluster is reachable."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from conftest import run_doctests
from hypothesis import given
from hypothesis import strategies as st

import mushin_box._slurm.config
import mushin_box._slurm.probe
from mushin_box._slurm.grammar import memory_fields, parse_slurm_memory, parse_slurm_time
from mushin_box._slurm.probe import _probe, probe_slurm  # pyright: ignore[reportPrivateUsage]

small = st.integers(min_value=0, max_value=99)


@given(days=st.integers(0, 30), hours=small, minutes=small, seconds=small)
def test_every_form_of_slurm_time_is_its_minutes_rounded_up(
    days: int, hours: int, minutes: int, seconds: int
) -> None:
    forms = {
        f"{days}-{hours}": days * 1440 + hours * 60,
        f"{days}-{hours}:{minutes}": days * 1440 + hours * 60 + minutes,
        f"{days}-{hours}:{minutes}:{seconds}": days * 1440 + hours * 60 + minutes + seconds / 60,
        f"{hours}:{minutes:02d}:{seconds:02d}": hours * 60 + minutes + seconds / 60,
        f"{minutes}:{seconds}": minutes + seconds / 60,
        f"{minutes}": minutes,
    }
    for text, exact in forms.items():
        expected = math.ceil(exact)
        if expected < 1:
            with pytest.raises(ValueError, match="at least a minute"):
                parse_slurm_time(text)
        else:
            assert parse_slurm_time(text) == expected, text


def test_the_issues_examples_and_refusals() -> None:
    assert parse_slurm_time("1:30:00") == 90
    assert parse_slurm_time("2:00:00") == 120
    assert parse_slurm_time("1-00:00:00") == 1440
    assert parse_slurm_time(90) == 90
    for bad in ("2h", "1:2:3:4", "-5", "1.5", "", "1-", True, 1.5):
        with pytest.raises(ValueError, match="not a SLURM time"):
            parse_slurm_time(bad)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="needs a time limit"):
        parse_slurm_time("UNLIMITED")


@given(n=st.integers(0, 10**6), unit=st.sampled_from(["", "K", "M", "G", "T", "k", "g"]))
def test_memory_sizes_are_megabytes(n: int, unit: str) -> None:
    per_mb = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}[unit.upper()]
    mb = parse_slurm_memory(f"{n}{unit}")
    assert mb == math.ceil(n * per_mb)
    fields = memory_fields(mb)
    if mb and mb % 1024 == 0:
        assert fields == {"mem_gb": mb // 1024}
    else:  # not whole gigabytes: sbatch's own --mem, in megabytes
        assert fields == {"additional_parameters": {"mem": f"{mb}M" if mb else "0"}}


def test_memory_refusals() -> None:
    assert parse_slurm_memory("64G") == 64 * 1024 and parse_slurm_memory("500M") == 500
    for bad in ("1.5G", "64 GiB", "G", "-1G", True, 2.0):
        with pytest.raises(ValueError, match="not a SLURM memory size"):
            parse_slurm_memory(bad)  # pyright: ignore[reportArgumentType]


def test_additional_mem_excludes_the_other_memory_options() -> None:
    from mushin_box._slurm.config import submitit_slurm_config

    with pytest.raises(ValueError, match="mutually exclusive"):
        submitit_slurm_config(
            nodes=1, gpus_per_node=1, mem_gb=2, additional_parameters={"mem": "500M"}
        )


# ------------------------------------------------------------------------------- the probe


def _bin(tmp_path: Path, **scripts: str) -> str:
    """A PATH of stand-in commands (``name=shell body``); no real SLURM client on it."""
    d = tmp_path / "bin"
    d.mkdir()
    for name, body in scripts.items():
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)
    return f"{d}{os.pathsep}/usr/bin/nonexistent"


def test_sbatch_on_path_is_not_a_cluster(tmp_path: Path) -> None:
    path = _bin(
        tmp_path,
        sbatch="exit 1",
        scontrol="echo 'scontrol: fatal: Could not establish a configuration source' >&2\nexit 1",
    )
    probe = _probe(5.0, None, path)
    assert not probe.reachable
    assert probe.reason == "scontrol ping: Could not establish a configuration source"


def test_a_controller_that_answers_is_a_cluster(tmp_path: Path) -> None:
    path = _bin(tmp_path, sbatch="exit 1", scontrol="echo 'Slurmctld(primary) at ctl is UP'")
    assert _probe(5.0, None, path).reachable


def test_no_sbatch_no_scontrol_and_a_missing_slurm_conf(tmp_path: Path) -> None:
    assert _probe(5.0, None, str(tmp_path)).reason == "no sbatch on PATH"
    only_sbatch = _bin(tmp_path, sbatch="exit 1")
    assert "no scontrol" in _probe(5.0, None, only_sbatch).reason
    # every SLURM client retries a missing SLURM_CONF for a minute: answered without asking
    missing = str(tmp_path / "nope.conf")
    assert _probe(5.0, missing, only_sbatch).reason == f"SLURM_CONF={missing} is not a file"


def test_a_controller_that_never_answers_is_bounded(tmp_path: Path) -> None:
    path = _bin(tmp_path, sbatch="exit 1", scontrol="exec sleep 30")
    probe = _probe(0.5, None, path)
    assert not probe.reachable and "no answer within 0.5 s" in probe.reason


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_client")  # a real scontrol
def test_a_real_scontrol_with_its_controller_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "slurm.conf"  # a controller on a port nothing listens on
    conf.write_text("ClusterName=down\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    probe = probe_slurm()
    assert not probe.reachable and probe.reason.startswith("scontrol ping: "), probe


def test_doctests() -> None:
    assert run_doctests(mushin_box._slurm.config).failed == 0
    assert run_doctests(mushin_box._slurm.probe).failed == 0

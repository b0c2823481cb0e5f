# SPDX-License-Identifier: MIT
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

# the local SLURM cluster fixture (tests marked `slurm`)
pytest_plugins = (
    ["_slurm_cluster"] if (Path(__file__).parent / "_slurm_cluster.py").exists() else []
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cleandir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside a fresh temporary directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def rank_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory where every rank of mushin_box.testing.TinyModule logs what it did."""
    d = tmp_path / "rank-log"
    d.mkdir()
    monkeypatch.setenv("MUSHIN_TEST_RANK_LOG", str(d))
    return d


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # a test must not inherit rank/seed state from another test in the same process
    for name in (
        "MUSHIN_SEED_BASE",
        "MUSHIN_SEED_WORKERS",
        "MUSHIN_JOB_DIR",
        "MUSHIN_GLOBAL_RANK",
        "PL_GLOBAL_SEED",
        "PL_SEED_WORKERS",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_JOB_ID",
    ):
        if name in os.environ:
            monkeypatch.delenv(name)


def read_rank_logs(directory: Path) -> dict[int, list[dict[str, str]]]:
    """rank -> list of {key: value} records written by TinyModule."""
    out: dict[int, list[dict[str, str]]] = {}
    for f in sorted(directory.glob("rank*.log")):
        rank = int(f.stem[4:])
        out[rank] = [
            dict(part.split("=", 1) for part in line.split()) for line in f.read_text().splitlines()
        ]
    return out


def assert_same(actual: Any, expected: Any, *, key_order: bool = True) -> None:
    """Exact equality: same types (tuples become lists), nan == nan, -0.0 != 0.0."""
    if isinstance(expected, tuple):
        expected = list(expected)
    if isinstance(expected, float):
        assert type(actual) is float, (actual, expected)
        if math.isnan(expected):
            assert math.isnan(actual)
        else:
            assert actual == expected
            assert math.copysign(1.0, actual) == math.copysign(1.0, expected)
    elif isinstance(expected, list):
        assert type(actual) is list, (actual, expected)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e, key_order=key_order)
    elif isinstance(expected, dict):
        assert type(actual) is dict, (actual, expected)
        if key_order:
            assert list(actual) == list(expected)
        else:
            assert sorted(actual) == sorted(expected)
        for k in expected:
            assert_same(actual[k], expected[k], key_order=key_order)
    else:
        assert type(actual) is type(expected), (actual, expected)
        assert actual == expected

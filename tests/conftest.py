# SPDX-License-Identifier: MIT
from __future__ import annotations

import os
from pathlib import Path

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

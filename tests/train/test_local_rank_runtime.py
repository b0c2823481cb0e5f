# SPDX-License-Identifier: MIT
"""``launch --local --gpus 2``: the rank HydraDDP starts records where it runs itself, as a
SLURM task or a torchrun worker does, and the cell's record shows both ranks and the image
each ran in, by digest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from mushin_box._core.sidecars import read_json

pytestmark = pytest.mark.slow

DIGEST = "c" * 64


def test_every_local_rank_writes_its_own_runtime_record(tmp_path: Path) -> None:
    # as inside an image: what Apptainer and the env file set, inherited by the ranks
    env = {**os.environ, "APPTAINER_CONTAINER": "/images/i.sif", "MUSHIN_SIF_SHA256": DIGEST}
    argv = [sys.executable, "-m", "mushin_box", "launch", "examples/exp.py", "--local"]
    argv += ["--gpus", "2", "--working-dir", str(tmp_path / "w"), "--no-progress"]
    run = subprocess.run(
        [*argv, "trainer.max_epochs=1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    (cell,) = {p.parent for p in (tmp_path / "w").rglob("mushin_provenance.json")}
    ranks = sorted(p.name for p in (cell / ".mushin" / "ranks").iterdir())
    assert ranks == ["rank0.json", "rank1.json"]
    record = read_json(cell / "mushin_provenance.json")
    (group,) = record["run"]["rank_runtime"]
    assert group["ranks"] == [0, 1]
    assert (group["container"], group["sif_sha256"]) == ("/images/i.sif", DIGEST)
    assert record["reproducibility"]["ranks"]["images"] == 1
    placed = record["run"]["topology"]["ranks"]
    assert [row[:3] for row in placed] == [[0, 0, 0], [1, 1, 0]]

# SPDX-License-Identifier: MIT
"""``launch --torchrun --slurm --image``: torchrun and its workers in a real image, isolated
by the STAND-IN namespace runtime tests/standins/nsapptainer/apptainer (NOT Apptainer), on
the local SLURM cluster. The image and the runtime are test_nsruntime.py's (its fixtures:
built on first use, reused from the cache; skipped without root, failed under
MUSHIN_REQUIRE_NSRUNTIME=1)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_nsruntime import (  # noqa: F401  (fixtures, used by name)
    EXPERIMENT,
    nsapptainer,
    nsruntime_bin,
    test_image,
)

from mushin_box._core.sidecars import read_json
from mushin_box._image.build import read_manifest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_two_torchrun_agents_run_their_workers_in_the_image(
    slurm_cluster: Any,
    nsapptainer: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    # 2 nodes x 2 workers: each node's task is `apptainer exec --cleanenv --env-file ...
    # image python -m mushin_box._slurm.torchrun agent ...`; the agent finds the rendezvous
    # in the job's variables that the env file forwarded, and runs the image's torchrun
    project = tmp_path / "project"
    project.mkdir()
    exp = project / f"image_exp_{uuid.uuid4().hex[:8]}.py"
    exp.write_text(EXPERIMENT)
    sweep = tmp_path / "sweep"
    launch = [sys.executable, "-m", "mushin_box", "launch", exp.name, "--torchrun", "--slurm"]
    launch += ["--nodes", "2", "--gpus", "2", "--partition", slurm_cluster.partition]
    launch += ["--time", "10", "--image", str(nsapptainer), "--working-dir", str(sweep)]
    proc = subprocess.run(
        [*launch, "--no-progress"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = read_json(sweep / "cell" / "mushin_provenance.json")
    image_python = read_manifest(nsapptainer).python_version
    assert image_python != ".".join(map(str, sys.version_info[:3]))  # not the host's
    # every worker ran in the image, on its Python (the image's venv), not only rank 0
    assert record["reproducibility"]["ranks"] == {
        "python": [image_python],
        "in_image": "all",
        "images": 1,
    }
    (group,) = record["run"]["rank_runtime"]
    assert group["ranks"] == [0, 1, 2, 3] and group["executable"].startswith("/opt/mushin/")
    run = record["run"]
    assert run["launcher"]["kind"] == "torchrun" and run["rendezvous"]["backend"] == "c10d"
    topology = run["topology"]
    assert topology["world_size"] == 4
    assert len(topology["nodes"]) == 2 and set(topology["nodes"]) <= set(slurm_cluster.nodes)
    assert read_json(sweep / "cell" / "mushin_status.json")["status"] == "completed"

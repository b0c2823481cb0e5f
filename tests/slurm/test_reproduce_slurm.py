# SPDX-License-Identifier: MIT
"""``mushin-box reproduce`` of a cell that ran on the local SLURM cluster in an image.

The image runs through the Apptainer STAND-IN (``tests/standins/apptainer-standin``; not
Apptainer: it runs the rank on the host and checks only its arguments, see its header).
One original run serves both checks, to keep the cluster time small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mushin_box._core.layout import PROVENANCE_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

EXP = """
from pathlib import Path

from mushin_box import Workflow


def task(x: float = 1.0, data: str = "") -> dict:
    return {"loss": x * float(Path(data).read_text())}


workflow = Workflow(task)
"""


def _jobs_from(directory: Path) -> set[str]:
    """Ids of the jobs submitted from ``directory``: queued or running, and accounted."""
    queued = subprocess.run(
        ["squeue", "-h", "-o", "%i|%Z"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    accounted = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID,WorkDir", "-S", "now-1days"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [line.split("|", 1) for line in (queued + accounted).splitlines() if "|" in line]
    return {job.split("_")[0].strip() for job, where in rows if Path(where.strip()) == directory}


def _after(argv: list[str], first: str, then: str) -> bool:
    """``first`` is in ``argv``, followed by ``then``."""
    return any(a == first and b == then for a, b in zip(argv, argv[1:], strict=False))


def test_reproduced_in_the_same_sif_with_its_binds_and_refused_in_another(
    slurm_cluster: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from conftest import APPTAINER_STANDIN, standin_image

    from mushin_box._image.sif import file_sha256

    project = tmp_path / "project"
    project.mkdir()
    exp = project / f"repro_exp_{uuid.uuid4().hex[:8]}.py"
    exp.write_text(textwrap.dedent(EXP))
    data = tmp_path / "data"  # bound into the image with --bind
    data.mkdir()
    (data / "v.txt").write_text("2.5\n")
    (tmp_path / "images").mkdir()
    image = standin_image(tmp_path / "images")
    log = tmp_path / "standin.jsonl"
    monkeypatch.setenv("PATH", f"{APPTAINER_STANDIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MUSHIN_STANDIN_LOG", str(log))
    monkeypatch.setattr(sys, "path", list(sys.path))  # reproduce imports the experiment
    sweep = tmp_path / "sweep"
    launched = subprocess.run(
        [
            *(sys.executable, "-m", "mushin_box", "launch", exp.name, "--gpus", "1"),
            *("--partition", slurm_cluster.partition, "--time", "5", "--image", str(image)),
            *("--bind", str(data), "--image-python", sys.executable),
            *("--working-dir", str(sweep), "--no-progress", f"data={data / 'v.txt'}", "x=2"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=project,
    )
    assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-3000:]
    cell = sweep / "cell"
    original_job = read_json(cell / STATUS_FILE)["slurm_job_id"]
    monkeypatch.chdir(project)  # where a user would run it

    # another SIF: refused before anything is submitted, both digests named
    other = tmp_path / "other.sif"
    other.write_bytes(image.read_bytes() + b"\0")
    refused = tmp_path / "refused"
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(refused), "--image", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"sha256 {file_sha256(other)}, but the cell ran in sha256 {file_sha256(image)}" in err
    assert not refused.exists()
    assert _jobs_from(project) <= {original_job}  # no job but the original's

    # the same SIF: a dry run passes pre-flight and shows the env file that will run, with
    # the image's identity, under the name the real run then uses
    into = tmp_path / "again"
    capsys.readouterr()
    dry = ["reproduce", str(cell), "--into", str(into), "--image", str(image), "--dry-run"]
    assert main([*dry, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["plan"]["env_file"]
    assert f"MUSHIN_SIF_SHA256={file_sha256(image)}" in shown["text"].splitlines()
    assert not into.exists()

    # the same SIF: reproduced, with the launch's --bind and --image-python again
    assert main(["reproduce", str(cell), "--into", str(into), "--image", str(image)]) == 0
    out = capsys.readouterr().out
    assert "Breaks reproducibility: nothing" in out and out.rstrip().endswith("reproduced")
    record = read_json(into / "cell" / PROVENANCE_FILE)
    assert record["run"]["reproduction"]["of"] == str(cell)
    recorded = record["run"]["container"]["rank_argv"]  # the re-run's rank command
    ran = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    ran = [a for a in ran if a[0] == "exec" and any(str(into) in w for w in a)]
    assert len(ran) == 1  # what the stand-in was given, once (one rank)
    for argv in (recorded, ran[0]):
        assert _after(argv, "--bind", str(data)) and _after(argv, str(image), sys.executable)
    assert _after(ran[0], "--env-file", shown["path"])  # the file the dry run showed
    assert read_json(into / "cell" / "mushin_metrics.json") == read_json(
        cell / "mushin_metrics.json"
    )

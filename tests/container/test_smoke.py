# SPDX-License-Identifier: MIT
"""mushin-box smoke through the Apptainer STAND-IN (tests/standins/apptainer-standin):
the rank wrapper and env file are real, Apptainer is not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import APPTAINER_STANDIN as STANDIN
from conftest import REPO, standin_image

from mushin_box._image.sif import file_sha256

pytestmark = pytest.mark.slow


def _smoke(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}",
        "MY_SECRET_TOKEN": "PLANTED",
    }
    cmd = [
        sys.executable,
        "-m",
        "mushin_box",
        "smoke",
        "--image",
        str(standin_image(tmp_path)),
        "--out",
        str(tmp_path / "out"),
        "--python",
        sys.executable,
        "--timeout",
        "240",
        *extra,
    ]
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_smoke_two_ranks_through_the_rank_wrapper(tmp_path: Path) -> None:
    proc = _smoke(tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "PASS" in proc.stdout
    assert len(list((tmp_path / "out").rglob("fit_metrics.pt"))) == 1
    assert "rank 1 of 2 done" in proc.stdout and "rank 0 of 2 done" in proc.stdout
    # the same env file as a SLURM rank's: content-addressed, with the image's identity
    (path,) = (tmp_path / "out" / ".mushin-box").glob("apptainer-*.env")
    lines = path.read_text().splitlines()
    assert 'SLURM_PROCID="${SLURM_PROCID:?}"' in lines and "PLANTED" not in path.read_text()
    image = tmp_path / "img.sif"
    assert f"MUSHIN_SIF_SHA256={file_sha256(image)}" in lines
    assert f"MUSHIN_IMAGE_BASE_DIGEST=sha256:{'1' * 64}" in lines
    assert "MUSHIN_APPTAINER_VERSION=0.0.0-standin" in lines  # the stand-in's --version
    assert f"MUSHIN_ENV_FILE={path}" in lines
    (command,) = [line for line in lines if line.startswith("MUSHIN_RANK_COMMAND=")]
    assert f"--env-file {path} " in command and str(image) in command


# the smoke's Trainer and kit classes are of the Lightning namespace of the user's module
@pytest.mark.parametrize("door", ["mushin_box.testing", "mushin_box.lightning"])
def test_smoke_with_a_user_experiment_file(tmp_path: Path, door: str) -> None:
    exp = tmp_path / "exp.py"
    exp.write_text(
        "from hydra_zen import builds, make_config\n"
        f"from {door} import TinyDataModule, TinyModule\n"
        "Config = make_config(module=builds(TinyModule, lr=0.1),"
        " datamodule=builds(TinyDataModule, n=32))\n"
    )
    proc = _smoke(tmp_path, str(exp))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_smoke_refuses_an_image_that_fails_preflight(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "smoke", "--image", str(tmp_path / "none.sif")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_smoke_without_apptainer_on_path_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    image = standin_image(tmp_path)
    tmp = tmp_path / "tmp"  # where a default --out would go
    tmp.mkdir()
    bindir = Path(sys.executable).parent  # python, but no apptainer
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}/usr/bin:/bin", "TMPDIR": str(tmp)}
    assert not any((Path(d) / "apptainer").exists() for d in env["PATH"].split(os.pathsep))
    for out in ([], ["--out", str(tmp_path / "out")]):
        proc = subprocess.run(
            [sys.executable, "-m", "mushin_box", "smoke", "--image", str(image), *out],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.splitlines()  # one line, the fix in it
        assert line.startswith(
            "mushin-box smoke: error: apptainer was not found on PATH, and it is needed to "
            "run the smoke fit's ranks (`apptainer exec`). Get it with "
        ), proc.stderr
        assert "Traceback" not in proc.stderr and "module load apptainer" in proc.stderr
        assert "--dry-run" not in proc.stderr  # build's hint, not smoke's
        assert not (tmp_path / "out").exists() and list(tmp.iterdir()) == []


def test_smoke_refuses_a_text_file_as_image(tmp_path: Path) -> None:
    image = tmp_path / "img.sif"
    image.write_text("Bootstrap: docker\nFrom: python:3.11\n")
    env = {**os.environ, "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "smoke", "--image", str(image)]
        + ["--out", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"image {image} is not a SIF image" in proc.stderr and "Traceback" not in proc.stderr
    assert "mushin-box build" in proc.stderr and not (tmp_path / "out").exists()


def test_smoke_with_relative_paths_from_the_users_directory(tmp_path: Path) -> None:
    # the help's own example, `mushin-box smoke examples/exp.py --image image.sif`: the ranks
    # start in --pwd OUT, so both relative paths must be resolved here first
    work = tmp_path / "project"
    (work / "examples").mkdir(parents=True)
    (work / "examples" / "exp.py").write_text(
        "from hydra_zen import builds, make_config\n"
        "from mushin_box.testing import TinyDataModule, TinyModule\n"
        "Config = make_config(module=builds(TinyModule, lr=0.1),"
        " datamodule=builds(TinyDataModule, n=32))\n"
    )
    standin_image(work)  # work/img.sif and its manifest
    env = {**os.environ, "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "mushin_box", "smoke", "examples/exp.py", "--image", "img.sif"]
    cmd += ["--out", str(tmp_path / "out"), "--python", sys.executable, "--timeout", "240"]
    proc = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "PASS" in proc.stdout

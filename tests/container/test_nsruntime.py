# SPDX-License-Identifier: MIT
"""Ranks in a real image, isolated by the STAND-IN namespace runtime
tests/standins/nsapptainer/apptainer (NOT Apptainer: passing here does not show that
anything works under Apptainer).

The image is containers/test-image.py's (Debian bookworm, mushin-box in /opt/mushin), built
by ``mushin-box build`` (the native builder) in the ``test_image`` fixture on first use
(minutes; root here, though the builder needs none) and kept in its cache, one entry per
recipe, after.
The runtime needs root (mount namespaces, loop devices): without CAP_SYS_ADMIN these tests
skip, unless MUSHIN_REQUIRE_NSRUNTIME=1 (CI), which makes them fail instead.

    .venv/bin/python -m pytest -p no:cacheprovider tests/container/test_nsruntime.py
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, STANDINS

from mushin_box._image.build import manifest_path, native_recipe, read_manifest
from mushin_box.cli.build import load_spec

RUNTIME = STANDINS / "nsapptainer" / "apptainer"
TEST_IMAGE_SPEC = "containers/test-image.py"
CACHE = Path(os.environ.get("MUSHIN_TEST_IMAGE_CACHE", "/var/cache/mushin-box/test-image"))
KEEP, IDLE_S = 2, 6 * 3600  # entries kept beyond the newest two: those used this recently
BUILD_TIMEOUT = 3600  # a cold build: mmdebstrap, the torch wheel, mksquashfs
EXEC_TIMEOUT = 120
# the first test to use the image may build it: its bound must cover a cold build
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + 300)


def _mount_problem() -> str | None:
    """Why this process cannot give the runtime its mounts, or None when it can."""
    if os.geteuid() != 0:
        return "not root: the namespace runtime needs CAP_SYS_ADMIN (mount, loop, chroot)"
    caps = next(
        (line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
         if line.startswith("CapEff:")),
        "0",
    )  # fmt: skip
    if not int(caps, 16) & (1 << 21):
        return "no CAP_SYS_ADMIN in this process's effective capabilities"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not on PATH"
    probe = ["unshare", "--mount", "--propagation", "private", "--"]
    probe += ["mount", "-t", "tmpfs", "nsapptainer-probe", "/mnt"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"`{' '.join(probe)}` could not run: {error}"
    if proc.returncode != 0:
        return f"cannot mount in a private mount namespace: {proc.stderr.strip()}"
    return None


@pytest.fixture(scope="session")
def nsruntime_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``apptainer``: the STAND-IN namespace runtime, run by this Python.
    Skips (fails with MUSHIN_REQUIRE_NSRUNTIME=1) when it could not mount."""
    problem = _mount_problem()
    if problem is not None:
        message = f"namespace runtime unavailable: {problem}"
        if os.environ.get("MUSHIN_REQUIRE_NSRUNTIME") == "1":
            pytest.fail(f"{message} (MUSHIN_REQUIRE_NSRUNTIME=1)", pytrace=False)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("nsapptainer-bin")
    wrapper = folder / "apptainer"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{RUNTIME}" "$@"\n')
    wrapper.chmod(0o755)
    return folder


def image_recipe() -> str:
    """The recipe sha256 of containers/test-image.py as the build computes it: the cache
    key, so that sessions on other sources never swap the image under each other."""
    spec_file = str(REPO / TEST_IMAGE_SPEC)
    return native_recipe(load_spec(spec_file)[0], REPO, spec_file)[0]


def _prune(keep: Path) -> None:
    """Remove cache entries beyond the newest KEEP that no session used for IDLE_S."""
    entries = [p for p in CACHE.iterdir() if p.is_dir() and p != keep and p.name[:1] != "."]
    for old in sorted(entries, key=lambda p: p.stat().st_mtime, reverse=True)[KEEP - 1 :]:
        if time.time() - old.stat().st_mtime > IDLE_S:  # never through a mount left in it
            subprocess.run(["rm", "-rf", "--one-file-system", str(old)], check=False)


@pytest.fixture(scope="session")
def test_image(nsruntime_bin: Path) -> Path:
    """containers/test-image.py built by ``mushin-box build`` into the cache entry of its
    recipe; a build of an unchanged recipe keeps the image there (its manifest's
    recipe_sha256) without building."""
    start = time.monotonic()
    entry = CACHE / image_recipe()[:16]
    entry.mkdir(parents=True, exist_ok=True)
    image = entry / "image.sif"
    argv = [sys.executable, "-m", "mushin_box", "build", TEST_IMAGE_SPEC, "-o", str(image)]
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session building: wait, then keep its image
        proc = subprocess.run(
            [*argv, "--backend", "native"],
            capture_output=True, text=True, timeout=BUILD_TIMEOUT, cwd=REPO,
        )  # fmt: skip
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
        os.utime(entry)  # used now: not pruned while a session may run on it
        _prune(entry)
    print(f"[nsruntime] test image {image} ready in {time.monotonic() - start:.1f}s")
    assert image.is_file() and read_manifest(image).sif_sha256
    return image


@pytest.fixture
def nsapptainer(nsruntime_bin: Path, test_image: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the namespace runtime first on PATH as ``apptainer``; return the test image."""
    monkeypatch.setenv("PATH", f"{nsruntime_bin}{os.pathsep}{os.environ['PATH']}")
    return test_image


@pytest.fixture(params=["nsruntime", pytest.param("apptainer", marks=pytest.mark.apptainer)])
def any_runtime(request: pytest.FixtureRequest) -> Path:
    """The test image, run by the namespace runtime and, where it is installed (tests marked
    ``apptainer``), by the real Apptainer on PATH: the same claims, checked against both."""
    if request.param == "nsruntime":
        return request.getfixturevalue("nsapptainer")
    return request.getfixturevalue("test_image")  # `apptainer` on PATH is the real one


def _exec(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["apptainer", "exec", *args],
        env=env if env is not None else dict(os.environ),
        # not the checkout: a checkout under /tmp (a default mount) would be the current
        # directory inside too, and `python -c` imports from it before the image's packages
        cwd=cwd if cwd is not None else "/",
        capture_output=True,
        text=True,
        timeout=EXEC_TIMEOUT,
    )


def _python_json(image: Path, code: str, *flags: str, **kwargs: object) -> object:
    proc = _exec(*flags, str(image), "python", "-c", code, **kwargs)  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def host_only_dir() -> Iterator[Path]:
    """A host directory outside every default mount (not /tmp, /var/tmp, $HOME, /dev...)."""
    path = Path("/srv") / f"nsapptainer-test-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    (path / "data.txt").write_text("host data\n")
    try:
        yield path
    finally:
        shutil.rmtree(path)


# ------------------------------------------------------------------- no image needed


def _runtime(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(RUNTIME), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=EXEC_TIMEOUT)


def test_version_says_stand_in() -> None:
    proc = _runtime("--version")
    assert proc.returncode == 0 and "stand-in" in proc.stdout
    assert proc.stdout.startswith("apptainer version ") and proc.stdout.count("\n") == 1


@pytest.mark.parametrize("flag", ["--contain", "-c", "--containall", "-C", "--fakeroot"])
def test_refused_flags_are_one_line(flag: str) -> None:
    proc = _runtime("exec", flag, "/nonexistent.sif", "true")
    assert proc.returncode == 255
    assert proc.stderr.startswith("FATAL:") and proc.stderr.count("\n") == 1


# ------------------------------------------------------------------- in the image


@pytest.mark.slow
def test_ranks_run_the_images_python(any_runtime: Path) -> None:
    code = "import json, sys; print(json.dumps([sys.executable, sys.version, sys.prefix]))"
    exe, version, prefix = _python_json(any_runtime, code, "--cleanenv")  # type: ignore[misc]
    assert exe == "/opt/mushin/bin/python" and prefix == "/opt/mushin"
    assert not Path(exe).exists()  # not a host path
    assert exe != sys.executable and version != sys.version
    image_python = read_manifest(any_runtime).python_version
    assert image_python and version.startswith(image_python + " ")
    assert image_python.split(".")[:2] == [str(v) for v in sys.version_info[:2]]


@pytest.mark.slow
def test_the_project_is_importable_in_the_image(any_runtime: Path) -> None:
    code = (
        "import json, mushin_box, torch; "
        "print(json.dumps([mushin_box.__file__, torch.__version__, torch.__file__]))"
    )
    mushin_file, torch_version, torch_file = _python_json(any_runtime, code, "--cleanenv")  # type: ignore[misc]
    site = "/opt/mushin/lib/python3.11/site-packages/"
    assert mushin_file.startswith(site) and torch_file.startswith(site)
    pin = next(
        line.split("==")[1]
        for line in (REPO / "ci" / "constraints.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    assert torch_version == pin and torch_version.endswith("+cpu")


def test_the_images_packages_are_run_lock_exactly(test_image: Path) -> None:
    """The tests' image holds what CI tested: every pip package at ci/run.lock's version (the
    hash-locked install), nothing more than mushin-box itself and the venv's pip."""

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    text = (REPO / "ci" / "run.lock").read_text()
    lock = {norm(k): v for k, v in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}
    have = {norm(k): v for k, v in read_manifest(test_image).packages.items()}
    assert {k: have.get(k) for k in lock if have.get(k) != lock[k]} == {}
    assert set(have) - set(lock) == {"mushin-box", "pip"}


@pytest.mark.slow
def test_unbound_paths_are_invisible_and_binds_honour_ro(
    any_runtime: Path, host_only_dir: Path
) -> None:
    probe = (
        "import json, os, sys; d = sys.argv[1]; ok = os.path.exists(d + '/data.txt'); "
        "w = None\n"
        "if ok:\n"
        "    try:\n"
        "        open(d + '/new.txt', 'w').write('x'); w = True\n"
        "    except OSError as e:\n"
        "        w = e.strerror\n"
        "print(json.dumps([ok, w]))"
    )
    image = str(any_runtime)

    def run(*binds: str, target: str = str(host_only_dir)) -> list[object]:
        argv = [*binds, image, "python", "-c", probe, target]
        proc = _exec("--cleanenv", *argv)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    assert run() == [False, None]  # the host has it, the container does not
    assert run("--bind", f"{host_only_dir}:/data:ro", target="/data") == [
        True,
        "Read-only file system",
    ]
    assert not (host_only_dir / "new.txt").exists()
    assert run("--bind", str(host_only_dir)) == [True, True]
    assert (host_only_dir / "new.txt").read_text() == "x"  # a rw bind writes to the host
    # the image itself is read-only; a default mount (/tmp) is the host's
    proc = _exec(image, "sh", "-c", "touch /image-root-file")
    assert proc.returncode != 0 and "Read-only file system" in proc.stderr


@pytest.mark.slow
def test_cleanenv_env_file_and_injection(nsapptainer: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "rank.env"
    env_file.write_text('FROM_FILE=file-value\nREF_HOST="${NSA_HOST_ONLY:?}"\n')
    host = {
        **os.environ,
        "NSA_HOST_ONLY": "planted",
        "TERM": "xterm-nsa",
        "APPTAINERENV_INJECTED": "in-$HOME",
    }
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    flags = ("--cleanenv", "--env-file", str(env_file))
    inside = _python_json(nsapptainer, code, *flags, env=host)
    assert isinstance(inside, dict)
    assert "NSA_HOST_ONLY" not in inside and "VIRTUAL_ENV" in inside  # the image's env
    assert inside["TERM"] == "xterm-nsa" and inside["LANG"] == "C"
    assert inside["FROM_FILE"] == "file-value"
    assert inside["REF_HOST"] == "planted"  # the file is evaluated on the host
    assert inside["INJECTED"] == f"in-{inside['HOME']}"  # evaluated once more inside
    assert inside["APPTAINER_CONTAINER"] == str(nsapptainer)
    assert inside["APPTAINER_NAME"] == nsapptainer.name
    assert inside["PATH"].startswith("/opt/mushin/bin:")
    without = _python_json(nsapptainer, code, env=host)
    assert isinstance(without, dict) and without["NSA_HOST_ONLY"] == "planted"
    failing = {k: v for k, v in host.items() if k != "NSA_HOST_ONLY"}
    proc = _exec(*flags, str(nsapptainer), "true", env=failing)
    assert proc.returncode == 255 and "NSA_HOST_ONLY" in proc.stderr


@pytest.mark.slow
def test_squashfuse_mount_runs_the_same_image(nsapptainer: Path) -> None:
    if shutil.which("squashfuse") is None or not os.path.exists("/dev/fuse"):
        pytest.skip("squashfuse or /dev/fuse missing: the loop-mount path is the one tested")
    env = {**os.environ, "MUSHIN_NSRUNTIME_SQUASHFUSE": "1"}
    code = "import json, sys; print(json.dumps(sys.executable))"
    assert _python_json(nsapptainer, code, "--cleanenv", env=env) == "/opt/mushin/bin/python"
    proc = _exec(str(nsapptainer), "sh", "-c", "exit 7", env=env)
    assert proc.returncode == 7


@pytest.mark.slow
def test_mushin_box_smoke_in_the_image(nsapptainer: Path, tmp_path: Path) -> None:
    log = tmp_path / "runtime.jsonl"
    env = {**os.environ, "MUSHIN_STANDIN_LOG": str(log)}
    argv = [sys.executable, "-m", "mushin_box", "smoke", "--image", str(nsapptainer)]
    argv += ["--out", str(tmp_path / "out"), "--timeout", "400"]
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "PASS" in proc.stdout
    assert "rank 0 of 2 done" in proc.stdout and "rank 1 of 2 done" in proc.stdout
    calls = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    execs = [c for c in calls if c[0] == "exec"]
    assert len(execs) == 2 and all(str(nsapptainer) in c and "--cleanenv" in c for c in execs)


# every character class the kit's writer must spell: quotes, shell metacharacters,
# backslashes, whitespace (newline and tab included), non-ASCII; NUL and CR are refused
ALPHABET = "".join(chr(c) for c in range(32, 127)) + "\n\t é漢🙂\u00a0 '\"\\'$`"


@pytest.mark.slow
@pytest.mark.parametrize("no_eval", [False, True])
def test_an_env_value_of_every_character_reaches_the_rank_byte_for_byte(
    any_runtime: Path, tmp_path: Path, no_eval: bool
) -> None:
    from mushin_box._container.launchspec import ContainerLaunch
    from mushin_box._container.rankwrap import render_env_file
    from mushin_box._container.smoke import smoke_rank_env

    spec = ContainerLaunch(
        image=str(any_runtime),
        project_dir=str(tmp_path),
        env={"ODD": ALPHABET},
        no_eval=no_eval,
        nv=False,  # no GPU here: an empty CUDA_VISIBLE_DEVICES would fail the launch
    )
    env_file = tmp_path / "ranks.env"
    env_file.write_text(render_env_file(spec))  # the whole file every rank reads
    task = {**smoke_rank_env(0, "4242"), "MUSHIN_MASTER_PORT": "15042"}  # what srun gives
    flags = ["--cleanenv", "--env-file", str(env_file), *(["--no-eval"] if no_eval else [])]
    code = "import json, os; print(json.dumps(os.environ['ODD']))"
    assert _python_json(any_runtime, code, *flags, env=task) == ALPHABET


EXPERIMENT = """
import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import HydraDDP, MetricsCallback
from mushin_box.testing import TinyDataModule, TinyModule

Config = make_config(
    seed=7,
    trainer=builds(
        pl.Trainer,
        accelerator="cpu",
        max_epochs=1,
        strategy=builds(HydraDDP),
        callbacks=[builds(MetricsCallback)],
        default_root_dir="${hydra:runtime.output_dir}",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    ),
    module=builds(TinyModule),
    datamodule=builds(TinyDataModule),
)
"""


def _linked_image(image: Path, where: Path) -> Path:
    """The image and its manifest under ``where`` (hard links: the cache's entry stays),
    so that a test may lose them as a user would."""
    where.mkdir()
    for made in (image, manifest_path(image)):
        os.link(made, where / made.name)
    return where / image.name


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT + 900)  # a cold rebuild of the image, on a loaded machine
def test_a_two_node_fit_on_slurm_runs_every_rank_in_the_image_which_a_rebuild_reproduces(
    slurm_cluster: Any, nsapptainer: Path, tmp_path: Path
) -> None:
    """2 nodes x 2 ranks, gloo, through sbatch/srun and the kit's rank wrapper: each rank is
    `apptainer exec --cleanenv --env-file ... image python`, here the namespace runtime.
    Then the image is lost, and ``reproduce --rebuild-image`` builds it again from the
    recipe the cell's record holds, to the recorded sha256, and re-runs the cell in it."""
    from mushin_box._core.sidecars import read_json
    from mushin_box._image.sif import file_sha256

    manifest = read_manifest(nsapptainer)
    if manifest.context_commit is None and os.environ.get("MUSHIN_REQUIRE_NSRUNTIME") != "1":
        pytest.skip("the tests' image was built from uncommitted inputs: no recipe to rebuild")
    image = _linked_image(nsapptainer, tmp_path / "images")
    project = tmp_path / "project"
    project.mkdir()
    exp = project / f"image_exp_{uuid.uuid4().hex[:8]}.py"
    exp.write_text(EXPERIMENT)
    sweep = tmp_path / "sweep"
    launch = [sys.executable, "-m", "mushin_box", "launch", exp.name, "--nodes", "2"]
    launch += ["--gpus", "2", "--partition", slurm_cluster.partition, "--time", "10"]
    launch += ["--image", str(image), "--working-dir", str(sweep), "--no-progress"]
    proc = subprocess.run(
        launch, cwd=project, capture_output=True, text=True, timeout=900, env=dict(os.environ)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = read_json(sweep / "cell" / "mushin_provenance.json")
    image_python = manifest.python_version
    assert image_python != ".".join(map(str, sys.version_info[:3]))  # not the host's
    assert record["reproducibility"]["image"]["sif_sha256"] == manifest.sif_sha256
    assert record["reproducibility"]["python"] == image_python  # rank 0's
    # every rank, not only rank 0, says it ran in this image, on its Python
    assert record["reproducibility"]["ranks"] == {
        "python": [image_python],
        "in_image": "all",
        "images": 1,
    }
    (group,) = record["run"]["rank_runtime"]
    assert group["ranks"] == [0, 1, 2, 3] and group["container"] == str(image)
    assert group["executable"].startswith("/opt/mushin/")  # the image's venv
    topology = record["run"]["topology"]
    assert topology["world_size"] == 4 and len(set(topology["nodes"])) == 2
    assert read_json(sweep / "cell" / "mushin_status.json")["status"] == "completed"

    # the image is lost; the commit that built it is in this checkout
    for made in (image, manifest_path(image)):
        made.unlink()
    again = tmp_path / "again"
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "reproduce", str(sweep / "cell"), "--into",
         str(again), "--rebuild-image"],
        cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT + 600,
        env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Breaks reproducibility: nothing" in proc.stdout
    assert proc.stdout.rstrip().endswith("reproduced")
    assert file_sha256(image) == manifest.sif_sha256  # rebuilt where it was, the same bytes
    rerun = read_json(again / "cell" / "mushin_provenance.json")
    assert rerun["reproducibility"]["image"]["sif_sha256"] == manifest.sif_sha256
    assert rerun["reproducibility"]["ranks"]["in_image"] == "all"
    assert read_json(again / "cell" / "mushin_metrics.json") == read_json(
        sweep / "cell" / "mushin_metrics.json"
    )

# SPDX-License-Identifier: MIT
"""A thin layer over the tests' image (``LocalImage`` bases), built by the native builder:
over the image's SIF and over its tree unpacked as a sandbox directory, as root, and
(slow) rebuilt by a user with no privileges into the same bytes.

The layer adds a file, an environment variable, a label and a test; the base's Python,
packages, environment and labels must all still be there, by Apptainer's rules for a build
over an image (the environment appended, the base's labels kept, its definition moved to
``bootstrap_history``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attr
import attrs
import pytest
from test_image_build import _unprivileged_user
from test_nsruntime import (  # noqa: F401  (fixtures, used by name)
    BUILD_TIMEOUT,
    _exec,
    image_recipe,
    nsapptainer,
    nsruntime_bin,
    test_image,
)

import mushin_box
from mushin_box._image.build import read_manifest
from mushin_box._image.sif import root_squashfs_offset
from mushin_box.cli import main as cli

pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + 300)

LAYER = """\
from mushin_box import ImageSpec, LocalImage

IMAGE = ImageSpec(
    base=LocalImage(path={base!r}),
    python={python!r},
    files=[("hello.txt", "/opt/hello.txt")],
    env={{"LAYER": "thin"}},
    labels={{"org.example.layer": "thin"}},
    test=["test -f /opt/hello.txt"],
    source_date_epoch=1764547200,
)
"""
CHECK = """\
import importlib.util, json, os
module = importlib.util.find_spec("mushin_box")
print(json.dumps([open("/opt/hello.txt").read(), os.environ.get("LAYER"),
                  os.environ.get("VIRTUAL_ENV"), module and module.origin,
                  json.load(open("/.singularity.d/labels.json")),
                  sorted(os.listdir("/.singularity.d/bootstrap_history"))]))
"""


def _context(base: Path, python: str = "/opt/mushin/bin/python") -> Path:
    """A build context any user can read: the layer's spec and its one file."""
    ctx = Path(tempfile.mkdtemp(prefix="mushin-layer-"))
    ctx.chmod(0o755)
    (ctx / "layer.py").write_text(LAYER.format(base=str(base), python=python))
    (ctx / "hello.txt").write_text("hello from the layer\n")
    return ctx


def _build(ctx: Path, out: Path) -> None:
    argv = ["build", str(ctx / "layer.py"), "-o", str(out), "--context", str(ctx)]
    assert cli.main(argv) == 0  # --backend auto: native for a LocalImage base


def _runs_over_its_base(image: Path, python: str = "python") -> str | None:
    """The layer's file, variable and label, over the base's environment and label; the
    file the image's ``mushin_box`` comes from, if it has one."""
    proc = _exec("--cleanenv", str(image), python, "-c", CHECK)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hello, layer, venv, module, labels, history = json.loads(proc.stdout)
    assert (hello, layer, venv) == ("hello from the layer\n", "thin", "/opt/mushin")
    assert labels["org.example.layer"] == "thin"
    assert labels["org.opencontainers.image.title"] == "mushin-box test image"  # the base's
    assert history == ["Apptainer0"]  # the base's definition, kept
    return module


@pytest.fixture(scope="module")
def layer(test_image: Path) -> Iterator[tuple[Path, Path]]:  # noqa: F811
    """The layer built over the tests' image SIF, as root: (context, image)."""
    ctx = _context(test_image)
    out = ctx / "out" / "layer.sif"
    try:
        _build(ctx, out)
        yield ctx, out
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


def test_a_layer_over_a_sif_is_built_natively_and_runs_over_its_base(
    layer: tuple[Path, Path],
    test_image: Path,  # noqa: F811
    nsapptainer: Path,  # noqa: F811
) -> None:
    _, image = layer
    manifest = read_manifest(image)
    assert manifest.backend == "native" and manifest.mirror is None
    assert manifest.base_image == f"localimage {test_image}"
    assert manifest.base_digest == "sha256:" + str(read_manifest(test_image).sif_sha256)
    assert "torch" in manifest.packages  # the base's venv, read by the layer's python
    assert manifest.recipe_sha256 and manifest.recipe_sha256 != image_recipe()
    module = _runs_over_its_base(image)
    assert module and module.startswith("/opt/mushin/")  # the base's venv, on PATH


def test_a_layer_over_a_sandbox_directory_is_built_natively(
    test_image: Path,  # noqa: F811
    nsapptainer: Path,  # noqa: F811
) -> None:
    sandbox = Path(tempfile.mkdtemp(prefix="mushin-sandbox-"))
    ctx = None
    try:
        # the tests' image but its /opt (the venv: 2 GB of torch), and Debian's python3
        offset = str(root_squashfs_offset(test_image))
        argv = ["unsquashfs", "-q", "-n", "-f", "-o", offset, "-d", str(sandbox)]
        subprocess.run([*argv, "-excludes", str(test_image), "opt"], check=True)
        ctx = _context(sandbox, python="python3")
        out = ctx / "out" / "layer.sif"
        _build(ctx, out)
        manifest = read_manifest(out)
        assert manifest.backend == "native" and manifest.base_digest is None
        assert manifest.base_image == f"localimage {sandbox}"
        assert _runs_over_its_base(out, "python3") is None  # no /opt/mushin in this base
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(sandbox)], check=False)
        if ctx is not None:
            shutil.rmtree(ctx, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is not installed")
def test_an_unprivileged_rebuild_of_a_layer_is_identical(layer: tuple[Path, Path]) -> None:
    ctx, image = layer
    user = _unprivileged_user()
    where = Path(tempfile.mkdtemp(prefix="mushin-unprivileged-layer-"))
    try:
        where.chmod(0o755)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for package in (mushin_box, attr, attrs):  # what the build imports, readable by user
            source = Path(str(package.__file__)).parent
            shutil.copytree(source, where / "pylib" / source.name, ignore=ignore)
        subprocess.run(["chown", "-R", user, str(where)], check=True)
        code = "import sys; from mushin_box.cli import main; sys.exit(main.main(sys.argv[1:]))"
        python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
        argv = ["runuser", "-u", user, "--", python, "-c", code, "build", "layer.py"]
        argv += ["--backend", "native", "--check", str(image)]
        env = {**os.environ, "PYTHONPATH": str(where / "pylib"), "HOME": str(where)}
        env["TMPDIR"] = str(where)  # the rebuild: the layer's directory is root's
        done = subprocess.run(argv, env=env, cwd=ctx, capture_output=True, text=True, timeout=800)
    finally:
        subprocess.run(["rm", "-rf", str(where)], check=False)
    assert (done.returncode, done.stdout) == (0, "identical\n"), done.stderr[-3000:]

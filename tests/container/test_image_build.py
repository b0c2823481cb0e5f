# SPDX-License-Identifier: MIT
"""The tests' image, as ``mushin-box build`` makes it (containers/test-image.py, the native
builder): what its manifest records, that a build of an unchanged recipe keeps the image, and
(slow) that an unprivileged user's rebuild of it is the same bytes as the root build.

The root build is the ``test_image`` fixture's (tests/container/test_nsruntime.py), so CI
builds the tests' image twice: once as root for the container tests, once here as a user
with no privileges (``mmdebstrap --mode=unshare``), through ``build --check``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attr
import attrs
import pytest
from conftest import REPO
from test_nsruntime import (  # noqa: F401  (fixtures, used by name)
    BUILD_TIMEOUT,
    TEST_IMAGE_SPEC,
    image_recipe,
    nsruntime_bin,
    test_image,
)

from mushin_box._image.build import manifest_path, read_manifest
from mushin_box._image.sif import root_squashfs_offset
from mushin_box.cli import main as cli

# the first test to use the image may build it: its bound must cover a cold build
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + 300)


def test_the_manifest_holds_the_recipe_and_every_package(test_image: Path) -> None:  # noqa: F811
    manifest = read_manifest(test_image)
    assert manifest.backend == "native" and manifest.build_argv[1] == "--mode=root"
    assert manifest.spec == TEST_IMAGE_SPEC
    # built from the repository's top: a rebuild from the commit builds there again
    assert manifest.context_dir == (None if manifest.context_commit is None else ".")
    assert manifest.recipe_sha256 == image_recipe()
    assert manifest.source_date_epoch == "1764547200" == str(manifest.sif_created)
    assert manifest.mirror and manifest.mirror.startswith("http")
    lock = (REPO / "ci" / "run.lock").read_text()
    torch = re.search(r"^torch==(\S+)", lock, re.M)
    assert torch and f"torch=={torch[1]}" in (manifest.pip_freeze or ())
    hashes = manifest.pip_hashes[f"torch=={torch[1]}"]
    assert hashes and all(h in lock for h in hashes)
    assert "python3=3.11.2-1+b1" in (manifest.dpkg_packages or ())
    assert manifest.dpkg_sha256["python3=3.11.2-1+b1"].startswith("sha256:")
    assert manifest.base_digest and manifest.base_digest.startswith("sha256:")
    # the host's tools, which a rebuild on another machine needs at the same versions
    assert set(manifest.build_tools) == {"mmdebstrap", "mksquashfs"}
    assert all(re.fullmatch(r"\d+(\.\d+)+\S*", v or "") for v in manifest.build_tools.values())


def test_a_build_of_an_unchanged_recipe_keeps_the_image(
    test_image: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = (test_image.stat().st_mtime_ns, manifest_path(test_image).stat().st_mtime_ns)
    start = time.monotonic()
    argv = ["build", str(REPO / TEST_IMAGE_SPEC), "-o", str(test_image), "--context", str(REPO)]
    assert cli.main(argv) == 0
    seconds = time.monotonic() - start
    out = capsys.readouterr().out
    assert "(up to date: the same recipe; --force builds)" in out
    assert f"sha256    {read_manifest(test_image).sif_sha256}" in out
    after = (test_image.stat().st_mtime_ns, manifest_path(test_image).stat().st_mtime_ns)
    assert after == before
    print(f"cache hit: {seconds:.2f} s", file=sys.stderr)


def _unprivileged_user() -> str:
    """A user that is not root, with subordinate ids for ``mmdebstrap --mode=unshare``."""
    name = "mushin-build-test"
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "-s", "/bin/sh", name], check=True)
    for path, flag in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        if not any(line.startswith(name + ":") for line in Path(path).read_text().splitlines()):
            subprocess.run(["usermod", flag, "300000-365535", name], check=True)
    return name


def _context_for(user: str, where: Path) -> Path:
    """The recipe's inputs, and a copy of mushin_box with the one package its build imports
    (attrs), where ``user`` can read them, wherever the checkout and the venv lie."""
    ctx = where / "ctx"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("containers", "ci", "mushin_box", "hydra_plugins"):
        shutil.copytree(REPO / name, ctx / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, ctx / name)
    for package in (attr, attrs):
        source = Path(package.__file__).parent
        shutil.copytree(source, where / "pylib" / source.name, ignore=ignore)
    subprocess.run(["chown", "-R", user, str(where)], check=True)
    return ctx


@pytest.mark.slow
@pytest.mark.timeout(1200)  # one cold build of the tests' image, on a loaded 2-core machine
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is not installed")
def test_an_unprivileged_rebuild_of_the_tests_image_is_identical(
    test_image: Path,  # noqa: F811
) -> None:
    user = _unprivileged_user()
    where = Path(tempfile.mkdtemp(prefix="mushin-unprivileged-"))  # tmp_path is root's alone
    try:
        where.chmod(0o755)
        ctx = _context_for(user, where)
        code = "import sys; from mushin_box.cli import main; sys.exit(main.main(sys.argv[1:]))"
        python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
        argv = ["runuser", "-u", user, "--", python, "-c", code, "build", TEST_IMAGE_SPEC]
        argv += ["--backend", "native", "--check", str(test_image)]
        env = {**os.environ, "PYTHONPATH": f"{ctx}:{where / 'pylib'}", "HOME": str(where)}
        env["TMPDIR"] = str(where)  # the rebuild: the cache's directory is root's
        start = time.monotonic()
        done = subprocess.run(argv, env=env, cwd=ctx, capture_output=True, text=True, timeout=1100)
        seconds = time.monotonic() - start
    finally:
        subprocess.run(["rm", "-rf", str(where)], check=False)
    assert (done.returncode, done.stdout) == (0, "identical\n"), done.stderr[-3000:]
    print(f"unprivileged rebuild and check: {seconds:.0f} s", file=sys.stderr)


def test_the_tests_image_holds_no_trace_of_the_day_or_the_machine_it_was_built_on(
    test_image: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A build on another day or machine gives the same bytes only if no file of the tree
    holds the build's clock or host. The image file's time is when it was built (a cache
    hit keeps it): no text file names that day or the one before (a date, a ctime stamp, or
    the day count of ``/etc/shadow``), where such files hold the recipe's day
    (``SOURCE_DATE_EPOCH``); and no file names this host's machine id, the build's
    directory, or the checkout it was built from."""
    tree = tmp_path / "tree"
    offset = str(root_squashfs_offset(test_image))
    unsquash = ["unsquashfs", "-q", "-n", "-o", offset, "-d", str(tree), str(test_image)]
    subprocess.run(unsquash, check=True, capture_output=True, timeout=600)
    recipe_day = int(read_manifest(test_image).source_date_epoch or 0) // 86400
    assert f"root:*:{recipe_day}:" in (tree / "etc" / "shadow").read_text()
    built = datetime.fromtimestamp(test_image.stat().st_mtime, UTC)
    days = [built - timedelta(days=n) for n in (0, 1)]
    patterns = [f"{d:%Y-%m-%d}|{d:%a %b} {d.day:2} [0-9:]+ {d:%Y}" for d in days]
    patterns += [f":{int(d.timestamp()) // 86400}:" for d in days]
    grep = ["grep", "-rlIE", "|".join(patterns), str(tree)]
    found = subprocess.run(grep, capture_output=True, text=True, timeout=600)
    assert found.returncode == 1 and found.stdout == "", found.stdout[-2000:]
    host = [f".{test_image.name}.native-", str(test_image.parent), str(REPO)]
    with contextlib.suppress(OSError):
        host.append(Path("/etc/machine-id").read_text().strip() or str(REPO))
    grep = ["grep", "-rlaF", *(f"-e{h}" for h in host), str(tree)]
    found = subprocess.run(grep, capture_output=True, text=True, timeout=600)
    assert found.returncode == 1 and found.stdout == "", found.stdout[-2000:]

# SPDX-License-Identifier: MIT
"""The native builder's fakechroot mode (``--native-mode fakechroot``): a user with no
privileges builds, with no user namespace and no subordinate ids, the bytes root builds;
where neither the unshare nor the fakechroot mode can run, one line names both fixes before
anything is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attr
import attrs
import pytest
from test_native import MIRROR, _build, _left, _tool_dir

import mushin_box
from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.build import build_image
from mushin_box._image.native import NativeBuildRefused, check_native
from mushin_box._image.spec import ImageSpec

#: the smallest spec the hook can build in: minbase and the Python it runs in the tree
SMALL = f"""\
from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.spec import ImageSpec
IMAGE = ImageSpec(
    base=Debootstrap(suite="bookworm", mirror={MIRROR!r}),
    apt=["python3=3.11.2-1+b1"],
    python="python3",
    labels={{"org.example.title": "small"}},
    source_date_epoch=1700000000,
)
"""
USER = "mushin-fakechroot-test"


def _user_with_no_privileges(where: Path) -> str:
    """A user that is not root; the build is told to use the fakechroot mode, so whether
    it has subordinate ids or user namespaces does not matter."""
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "-s", "/bin/sh", USER], check=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in (mushin_box, attr, attrs):  # mushin_box and what its build imports
        source = Path(package.__file__).parent
        shutil.copytree(source, where / "pylib" / source.name, ignore=ignore)
    (where / "small.py").write_text(SMALL)
    subprocess.run(["chown", "-R", USER, str(where)], check=True)
    return USER


@pytest.mark.slow
@pytest.mark.timeout(900)  # two builds of a small image on a loaded 2-core machine
@pytest.mark.skipif(os.geteuid() != 0, reason="builds as root and makes a user")
@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("mmdebstrap", "fakechroot", "fakeroot")),
    reason="needs mmdebstrap, fakechroot and fakeroot (scripts/system-packages)",
)
def test_a_fakechroot_build_by_a_user_is_roots_bytes() -> None:
    """Root builds the small spec; the user rebuilds it in the fakechroot mode with
    ``--check``, which names the first difference, if any."""
    namespace: dict[str, Any] = {}
    exec(SMALL, namespace)  # the test's own spec
    where = Path(tempfile.mkdtemp(prefix="mushin-fakechroot-"))  # tmp_path is root's alone
    try:
        where.chmod(0o755)
        start = time.monotonic()
        image = build_image(namespace["IMAGE"], where / "root" / "small.sif", backend="native",
                            native_mode="root")  # fmt: skip
        root_s = time.monotonic() - start
        user = _user_with_no_privileges(where)
        code = "import sys; from mushin_box.cli import main; sys.exit(main.main(sys.argv[1:]))"
        python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
        argv = ["runuser", "-u", user, "--", python, "-c", code, "build", "small.py", "--backend",
                "native", "--native-mode", "fakechroot", "--check", "root/small.sif"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(where / "pylib"), "HOME": str(where)}
        env["TMPDIR"] = str(where)  # the rebuild's: root/ is root's
        start = time.monotonic()
        done = subprocess.run(argv, env=env, cwd=where, capture_output=True, text=True,
                              timeout=800)  # fmt: skip
        fakechroot_s = time.monotonic() - start
    finally:
        subprocess.run(["rm", "-rf", str(where)], check=False)
    assert "--mode=root" in image.build_argv
    assert (done.returncode, done.stdout) == (0, "identical\n"), done.stderr[-3000:]
    print(f"root {root_s:.0f} s, fakechroot and check {fakechroot_s:.0f} s", file=sys.stderr)


def _nobody(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **tools: str) -> None:
    """This process as ``nobody``, its PATH the host's build tools and ``tools``."""
    monkeypatch.setattr(os, "geteuid", lambda: 65534)
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap="exit 1", **tools)))


def _small(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "image.py").write_text(SMALL)
    return ctx


@pytest.mark.parametrize(
    ("tools", "why"),
    [
        ({}, "needs newuidmap: install the Debian package uidmap"),
        ({"newuidmap": "", "newgidmap": "", "unshare": "exit 1"}, "needs user namespaces"),
    ],
    ids=["no-uidmap", "no-userns"],
)
def test_with_neither_unshare_nor_fakechroot_one_line_names_both_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, tools: dict[str, str], why: str
) -> None:
    ctx, out = _small(tmp_path), tmp_path / "out" / "img.sif"
    _nobody(monkeypatch, tmp_path, **tools)
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert why in err
    assert "install the Debian packages fakechroot fakeroot" in err
    assert _left(out) == []


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        (
            "fakechroot",
            "the native mode fakechroot: install the Debian packages fakechroot fakeroot",
        ),
        ("root", "the native mode root needs root"),
        ("unshare", "needs newuidmap: install the Debian package uidmap"),
    ],
)
def test_a_mode_asked_for_and_not_possible_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, mode: str, why: str
) -> None:
    ctx, out = _small(tmp_path), tmp_path / "out" / "img.sif"
    _nobody(monkeypatch, tmp_path)
    code, err = _build(ctx, out, capsys, "--backend", "native", "--native-mode", mode)
    assert code == 2 and len(err.strip().splitlines()) == 1 and why in err, err
    assert _left(out) == []


def test_without_unshare_a_user_with_fakechroot_gets_the_fakechroot_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """... for a Debootstrap base; a LocalImage base's tree, copied in outside fakechroot's
    chroot, is refused."""
    _nobody(monkeypatch, tmp_path, fakechroot="", fakeroot="")
    spec = ImageSpec(base=Debootstrap(suite="bookworm", mirror=MIRROR), source_date_epoch=1)
    assert check_native(spec, tmp_path) == ("fakechroot", 1)
    (sandbox := tmp_path / "sandbox").mkdir()
    layer = ImageSpec(base=LocalImage(path=str(sandbox)), source_date_epoch=1)
    with pytest.raises(NativeBuildRefused, match="the fakechroot mode builds Debootstrap bases"):
        check_native(layer, tmp_path)

# SPDX-License-Identifier: MIT
"""The native builder (``mushin-box build --backend native``): what it refuses, before
anything is written, in one line; that a failed build leaves nothing at the output path;
and (slow, network) that a root build and an unprivileged one (``mmdebstrap --mode=unshare``),
in different directories, are the same bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import attr
import attrs
import pytest

from mushin_box._image.bases import Debootstrap
from mushin_box._image.build import build_image, read_manifest
from mushin_box._image.definition import render_definition
from mushin_box._image.spec import ImageSpec
from mushin_box.cli import main as cli

MIRROR = os.environ.get("MUSHIN_TEST_IMAGE_MIRROR", "http://deb.debian.org/debian")
BASE = Debootstrap(suite="bookworm", mirror=MIRROR)
SIX = "six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
SPEC = f"""\
from mushin_box._image.bases import Debootstrap
from mushin_box._image.spec import ImageSpec
IMAGE = ImageSpec(
    base=Debootstrap(suite="bookworm", mirror={MIRROR!r}),
    apt=["python3=3.11.2-1+b1", "python3-venv=3.11.2-1+b1"],
    python="python3",
    venv="/opt/venv",
    pip_lock="requirements.lock",
    env={{"PYTHONUNBUFFERED": "1"}},
    labels={{"org.example.title": "tiny"}},
    runscript=["python"],
    test=["python -c 'import six'"],
)
"""


def _tool_dir(tmp_path: Path, **scripts: str) -> Path:
    """A PATH directory holding ``git`` and ``mksquashfs`` from this host and the given
    stand-in scripts (name -> shell body)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("git", "mksquashfs", "unsquashfs", "chroot", "sh", "cp", "mkdir"):
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _project(tmp_path: Path, *, commit: bool = True) -> Path:
    """A build context: the spec and a hash-locked lock, committed to git (its time is
    the build's SOURCE_DATE_EPOCH)."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "image.py").write_text(SPEC)
    (ctx / "requirements.lock").write_text(SIX.replace(" --hash", " \\\n    --hash") + "\n")
    if commit:
        env = {**os.environ, "GIT_COMMITTER_DATE": "1700000000 +0000", "HOME": str(tmp_path)}
        for argv in (
            ["git", "init", "-q"],
            ["git", "add", "."],
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock"],
        ):
            subprocess.run(argv, cwd=ctx, env=env, check=True)
    return ctx


def _build(ctx: Path, out: Path, capsys: Any, *extra: str) -> tuple[int, str]:
    code = cli.main(["build", str(ctx / "image.py"), "-o", str(out), "--context", str(ctx), *extra])
    return code, capsys.readouterr().err


def _left(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir()) if out.parent.exists() else []


def test_a_missing_host_tool_is_one_line_naming_its_debian_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path)))  # no mmdebstrap
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 2
    assert "needs mmdebstrap: install the Debian package mmdebstrap" in err
    assert len(err.strip().splitlines()) == 1
    assert _left(out) == []


def test_a_docker_base_is_refused_by_the_native_backend_in_one_line(
    tmp_path: Path, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "img.sif"
    docker = (
        "from mushin_box._image.spec import ImageSpec\nIMAGE = ImageSpec(base='debian@sha256:%s')\n"
    )
    (ctx / "image.py").write_text(docker % ("1" * 64))
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 2
    assert "is a Docker image: the native builder makes Debootstrap bases only; use " in err
    assert "--backend apptainer" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]


def test_auto_picks_apptainer_for_a_docker_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path)))  # no apptainer, no mmdebstrap
    spec = ImageSpec(base="debian@sha256:" + "2" * 64)
    with pytest.raises(Exception, match="apptainer was not found on PATH"):
        build_image(spec, tmp_path / "img.sif")


def test_pip_packages_without_a_venv_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    (ctx / "image.py").write_text(SPEC.replace('    venv="/opt/venv",\n', ""))
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap="exit 1")))
    code, err = _build(ctx, out, capsys)  # auto: native, for a Debootstrap base
    assert code == 2
    assert "need a venv" in err and "venv='/opt/venv'" in err
    assert _left(out) == []


def test_a_lock_with_uncommitted_changes_gives_no_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    (ctx / "requirements.lock").write_text(SIX + "\n")  # the same pins, not committed
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap="exit 1")))
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 2
    assert "requirements.lock has no commit time in git" in err
    assert "source_date_epoch" in err and len(err.strip().splitlines()) == 1
    assert _left(out) == []


def test_a_failed_build_leaves_nothing_at_the_output_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    out.parent.mkdir()
    (out.parent / "other.txt").write_text("kept")
    # as an unreachable mirror does: some of the tree is written, then mmdebstrap fails
    fails = 'n=$(($# - 1)); eval "root=\\${$n}"; mkdir -p "$root/etc/apt"; exit 25'
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap=fails)))
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 1
    assert "mmdebstrap failed with exit code 25" in err
    assert _left(out) == ["other.txt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount, as a killed mmdebstrap leaves")
def test_a_tree_left_with_a_mount_is_not_deleted_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    host = tmp_path / "host"
    host.mkdir()
    (host / "keep").write_text("a host file")
    mount, umount = shutil.which("mount"), shutil.which("umount") or "umount"
    leaves = 'n=$(($# - 1)); eval "root=\\${$n}"; mkdir -p "$root/proc"\n'
    leaves += f'{mount} --bind {host} "$root/proc"; exit 9'
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap=leaves)))
    try:
        code, err = _build(ctx, out, capsys, "--backend", "native")
        assert code == 1
        assert "still has mounts" in err and "/root/proc" in err
        assert (host / "keep").read_text() == "a host file"
    finally:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            if str(out.parent) in line.split()[4]:
                subprocess.run([umount, line.split()[4]], check=False)


def test_mmdebstrap_gets_the_spec_and_the_lock_commit_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    seen = tmp_path / "seen"
    record = f"echo SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH > {seen}\n"
    record += f'printf "%s\\n" "$@" >> {seen}; exit 3'
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap=record)))
    assert _build(ctx, out, capsys, "--backend", "native")[0] == 1
    lines = seen.read_text().splitlines()
    assert lines[0] == "SOURCE_DATE_EPOCH=1700000000"
    assert lines[2:4] == ["--variant=minbase", "--format=directory"]
    assert lines[4] == "--include=python3=3.11.2-1+b1,python3-venv=3.11.2-1+b1"
    assert lines[-3] == "bookworm" and lines[-1] == MIRROR
    assert Path(lines[-2]).parent.parent == out.parent  # built beside the image


def test_check_of_a_missing_image_is_one_line(tmp_path: Path, capsys: Any) -> None:
    ctx = _project(tmp_path)
    code, err = _build(ctx, tmp_path / "x.sif", capsys, "--check", str(tmp_path / "gone.sif"))
    assert code == 2
    assert err.strip().endswith(f"--check {tmp_path / 'gone.sif'}: no such image")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]


def test_a_venv_is_made_and_put_first_on_path() -> None:
    spec = ImageSpec(base=BASE, python="python3", venv="/opt/venv", pip=[SIX])
    text = render_definition(spec)
    assert "    python3 -m venv /opt/venv\n" in text
    assert "    /opt/venv/bin/python -m pip install --no-cache-dir --require-hashes" in text
    assert '    export PATH=/opt/venv/bin:"$PATH"\n    export VIRTUAL_ENV=/opt/venv\n' in text


def _mirror_reachable() -> bool:
    try:
        with urllib.request.urlopen(f"{MIRROR}/dists/bookworm/Release", timeout=10):
            return True
    except OSError:
        return False


def _unprivileged_user() -> str:
    """A user that is not root, with subordinate ids for ``mmdebstrap --mode=unshare``."""
    name = "mushin-build-test"
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "-s", "/bin/sh", name], check=True)
    for path, flag in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        if not any(line.startswith(name + ":") for line in Path(path).read_text().splitlines()):
            subprocess.run(["usermod", flag, "300000-365535", name], check=True)
    return name


def _build_as(user: str, ctx: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``mushin-box build`` as ``user``: the system's Python (a venv's may live in root's
    home), with a copy of mushin_box and the one package its build imports (attrs) that
    every user can read, wherever the checkout and the venv lie."""
    lib = ctx.parent / "pylib"
    shutil.copytree(Path(cli.__file__).parents[1], lib / "mushin_box", dirs_exist_ok=True)
    for package in (attr, attrs):
        source = Path(package.__file__).parent
        shutil.copytree(source, lib / source.name, dirs_exist_ok=True)
    subprocess.run(["chown", "-R", user, str(lib)], check=True)
    code = "import sys; from mushin_box.cli import main; sys.exit(main.main(sys.argv[1:]))"
    python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
    argv = ["runuser", "-u", user, "--", python, "-c", code, "build", str(ctx / "image.py")]
    argv += ["-o", str(out), "--context", str(ctx), "--backend", "native"]
    env = {**os.environ, "PYTHONPATH": str(lib), "HOME": str(ctx)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.timeout(600)  # three builds: 2-5 min on a loaded 2-core machine, mostly apt, dpkg
@pytest.mark.skipif(os.geteuid() != 0, reason="a root build, and a user made for the other one")
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is not installed")
def test_a_root_and_an_unprivileged_build_in_other_directories_are_the_same_bytes(
    tmp_path: Path, capsys: Any
) -> None:
    if not _mirror_reachable():
        pytest.skip(f"the Debian mirror {MIRROR} cannot be reached")
    user = _unprivileged_user()
    shared = Path(tempfile.mkdtemp(prefix="mushin-native-"))  # tmp_path is root's alone
    try:
        shared.chmod(0o755)
        ctx = _project(shared)
        start = time.monotonic()
        code, err = _build(ctx, tmp_path / "a" / "x" / "tiny.sif", capsys, "--backend", "native")
        seconds = [time.monotonic() - start]
        assert code == 0, err[-3000:]
        # --check rebuilds beside the image, in a directory of its own
        check = ["build", str(ctx / "image.py"), "--context", str(ctx), "--check"]
        code = cli.main([*check, str(tmp_path / "a" / "x" / "tiny.sif")])
        captured = capsys.readouterr()
        assert (code, captured.out) == (0, "identical\n"), captured.err[-3000:]
        subprocess.run(["chown", "-R", user, str(shared)], check=True)  # git: the user's repo
        start = time.monotonic()
        done = _build_as(user, ctx, shared / "b" / "y" / "z" / "tiny.sif")
        seconds.append(time.monotonic() - start)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        root, unprivileged = (
            read_manifest(d / "tiny.sif") for d in (tmp_path / "a" / "x", shared / "b" / "y" / "z")
        )
    finally:
        subprocess.run(["rm", "-rf", str(shared)], check=False)
    print(
        f"native builds: root {seconds[0]:.0f} s, unprivileged {seconds[1]:.0f} s", file=sys.stderr
    )
    assert unprivileged.build_argv[1] == "--mode=unshare" and root.build_argv[1] == "--mode=root"
    assert root.sif_sha256 == unprivileged.sif_sha256
    assert _left(tmp_path / "a" / "x" / "tiny.sif") == [
        "tiny.def",
        "tiny.sif",
        "tiny.sif.manifest.json",
    ]
    assert root.backend == "native" and root.source_date_epoch == "1700000000"
    assert root.mirror == MIRROR and root.sif_created == 1700000000
    assert "six==1.16.0" in (root.pip_freeze or ())
    assert root.pip_hashes == {"six==1.16.0": [SIX.split("--hash=")[1]]}
    assert "python3=3.11.2-1+b1" in (root.dpkg_packages or ())
    assert root.dpkg_sha256["python3=3.11.2-1+b1"].startswith("sha256:")

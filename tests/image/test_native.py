# SPDX-License-Identifier: MIT
"""The native builder (``mushin-box build --backend native``): what it refuses, before
anything is written, in one line; that a failed build leaves nothing at the output path;
that an image of the same recipe is kept and a changed input is built again; where the
image's pip finds packages. A real build, as root and as a user with no privileges, is
tests/container/test_image_build.py's (the tests' own image).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.build import Manifest, build_image, manifest_path, native_recipe
from mushin_box._image.definition import render_definition
from mushin_box._image.intree import _bind_points, _singularity_d
from mushin_box._image.native import (
    BuildError,
    _plan,
    context_dir,
    explain_failure,
    host_pip_settings,
    native_refusal,
    run_bounded,
)
from mushin_box._image.sif import write_sif
from mushin_box._image.spec import ImageSpec
from mushin_box.cli import main as cli
from mushin_box.cli.build import load_spec

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
    for tool in ("git", "mksquashfs", "unsquashfs", "chroot", "sh", "cp", "mkdir", "rm", "head",
                 "sleep", "touch"):  # fmt: skip
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    for name, body in scripts.items():
        (bin_dir / name).unlink(missing_ok=True)  # a link to the host's tool: never through it
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
    assert (
        "is a Docker image: the native builder makes Debootstrap and LocalImage bases only" in err
    )
    assert "--backend apptainer" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ctx"]


def test_auto_picks_apptainer_for_a_docker_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path)))  # no apptainer, no mmdebstrap
    spec = ImageSpec(base="debian@sha256:" + "2" * 64)
    with pytest.raises(Exception, match="apptainer was not found on PATH"):
        build_image(spec, tmp_path / "img.sif")


def test_a_local_base_is_built_natively_unless_its_root_is_not_squashfs(
    tmp_path: Path, capsys: Any
) -> None:
    sandbox, sif = tmp_path / "sandbox", tmp_path / "base.sif"
    sandbox.mkdir()
    write_sif(sif, b"hsqs" + bytes(60))
    for base in (sandbox, sif):
        assert native_refusal(ImageSpec(base=LocalImage(path=str(base)))) is None
    # the partition's fs type, 1 (squashfs) -> 2 (ext3): Apptainer's to build from
    data = bytearray(sif.read_bytes())
    at = data.find(struct.pack("<ii", 1, 2))
    data[at : at + 4] = struct.pack("<i", 2)
    sif.write_bytes(data)
    ctx, out = tmp_path / "ctx", tmp_path / "out" / "img.sif"
    ctx.mkdir()
    spec = "from mushin_box import ImageSpec, LocalImage\n"
    (ctx / "image.py").write_text(spec + f"IMAGE = ImageSpec(base=LocalImage(path={str(sif)!r}))\n")
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"the base {sif}: " in err and "no squashfs root file system" in err
    assert err.strip().endswith("use --backend apptainer") and not out.parent.exists()


def test_a_local_base_is_part_of_the_recipe(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    (sandbox / "etc").mkdir(parents=True)
    (sandbox / "etc" / "os-release").write_text("ID=debian\n")

    def recipe(base: Path) -> str:
        spec = ImageSpec(base=LocalImage(path=str(base)), source_date_epoch=1)
        return native_recipe(spec, tmp_path)[0]

    seen = [recipe(sandbox)]
    assert recipe(sandbox) == seen[0]  # the same tree, the same recipe
    (sandbox / "etc" / "os-release").write_text("ID=ubuntu\n")
    seen.append(recipe(sandbox))
    (sandbox / "etc" / "os-release").chmod(0o600)
    seen.append(recipe(sandbox))
    (sandbox / "etc" / "link").symlink_to("os-release")
    seen.append(recipe(sandbox))
    for squashfs in (b"hsqs" + bytes(60), b"hsqs" + bytes(61)):  # a SIF: by its bytes
        write_sif(tmp_path / "base.sif", squashfs, created=1)
        seen.append(recipe(tmp_path / "base.sif"))
    assert len(set(seen)) == len(seen)


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


def test_a_lock_git_cannot_read_is_refused_naming_git_not_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    tools = _tool_dir(tmp_path, mmdebstrap="exit 1")
    (tools / "git").unlink()  # no git on PATH: it cannot tell whether the lock is committed
    monkeypatch.setenv("PATH", str(tools))
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 2
    assert "`git status` could not read requirements.lock" in err and "git not installed" in err
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
@pytest.mark.parametrize("can_unmount", [True, False])
def test_a_tree_left_with_a_mount_is_never_deleted_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, can_unmount: bool
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    host = tmp_path / "host"
    host.mkdir()
    (host / "keep").write_text("a host file")
    mount, umount = shutil.which("mount"), shutil.which("umount") or "umount"
    leaves = 'n=$(($# - 1)); eval "root=\\${$n}"; mkdir -p "$root/proc"\n'
    leaves += f'{mount} --bind {host} "$root/proc"; exit 9'
    tools = _tool_dir(tmp_path, mmdebstrap=leaves)
    if can_unmount:
        (tools / "umount").symlink_to(umount)
    monkeypatch.setenv("PATH", str(tools))
    try:
        code, err = _build(ctx, out, capsys, "--backend", "native")
        assert code == 1
        assert (host / "keep").read_text() == "a host file"
        if can_unmount:  # the build unmounts what its tool left, then removes its tree
            assert "mmdebstrap failed with exit code 9" in err and _left(out) == []
        else:
            assert "still has mounts" in err and "/root/proc" in err
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
    assert lines[2:4] == ["--format=directory", "--variant=minbase"]
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


def _fake_image(ctx: Path, out: Path) -> str:
    """An image at ``out`` whose manifest holds the recipe of ``ctx``'s spec: what a native
    build leaves. Returns its recipe sha256."""
    spec_file = str(ctx / "image.py")
    recipe = native_recipe(load_spec(spec_file)[0], ctx, spec_file)[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"SIF bytes")
    manifest = Manifest(
        image=out.name, definition="image.def", definition_sha256="0" * 64, base_image="b",
        base_digest=None, build_argv=(), mushin_box_version="0", sif_sha256="1" * 64,
        sif_size=len(b"SIF bytes"), backend="native", recipe_sha256=recipe,
    )  # fmt: skip
    manifest_path(out).write_text(json.dumps(manifest.to_dict()))
    return recipe


def test_an_image_of_the_same_recipe_is_kept_without_any_build_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    _fake_image(ctx, out)
    before = manifest_path(out).stat().st_mtime_ns
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path)))  # no mmdebstrap: nothing can build
    assert cli.main(["build", str(ctx / "image.py"), "-o", str(out), "--context", str(ctx)]) == 0
    assert "(up to date: the same recipe; --force builds)" in capsys.readouterr().out
    assert manifest_path(out).stat().st_mtime_ns == before and out.read_bytes() == b"SIF bytes"
    # --force builds: here it reaches the missing tool
    code, err = _build(ctx, out, capsys, "--force")
    assert code == 2 and "needs mmdebstrap" in err


@pytest.mark.parametrize("change", ["lock", "spec", "mode"])
def test_a_changed_input_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, change: str
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    _fake_image(ctx, out)
    if change == "spec":
        (ctx / "image.py").write_text((ctx / "image.py").read_text() + "# a comment\n")
    else:  # the same pins wrapped otherwise, or made executable: committed, so another recipe
        if change == "lock":
            text = SIX.replace(" --hash", " \\\n  --hash") + "\n"
            (ctx / "requirements.lock").write_text(text)
        else:
            (ctx / "requirements.lock").chmod(0o755)
        env = {**os.environ, "GIT_COMMITTER_DATE": "1700000000 +0000", "HOME": str(tmp_path)}
        argv = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", change]
        subprocess.run(argv, cwd=ctx, env=env, check=True)
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap="exit 7")))
    code, err = _build(ctx, out, capsys)
    assert code == 1 and "mmdebstrap failed with exit code 7" in err
    assert out.read_bytes() == b"SIF bytes"  # a failed build leaves the old image


def test_the_context_commit_is_recorded_only_when_every_input_is_committed(
    tmp_path: Path,
) -> None:
    ctx, spec_file = _project(tmp_path), str(tmp_path / "ctx" / "image.py")
    spec, _ = load_spec(spec_file)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ctx, capture_output=True, text=True)
    assert native_recipe(spec, ctx, spec_file)[1:] == (head.stdout.strip(), "image.py")
    (ctx / "image.py").write_text((ctx / "image.py").read_text() + "# edited\n")
    assert native_recipe(spec, ctx, spec_file)[1] is None
    # where the context lies in the commit: a rebuild builds there again
    (ctx / "containers").mkdir()
    assert (context_dir(ctx), context_dir(ctx / "containers")) == (".", "containers")
    assert context_dir(tmp_path) is None  # in no work tree


def test_the_images_pip_finds_packages_where_the_hosts_pip_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"file://{tmp_path}/pypi/simple https://x.test/s")
    (tmp_path / "pypi" / "simple").mkdir(parents=True)
    env, paths = host_pip_settings()
    assert env["PIP_FIND_LINKS"] == str(wheels)
    assert env["PIP_EXTRA_INDEX_URL"].endswith("https://x.test/s")
    assert {str(wheels), str(tmp_path / "pypi" / "simple")} <= set(paths)
    # bound where the tree lacks the path: at its topmost missing directory
    tree = tmp_path / "tree"
    (tree / str(tmp_path).lstrip("/")).mkdir(parents=True)
    points = dict(_bind_points(tree, [str(wheels), str(tmp_path / "pypi" / "simple")]))
    assert points == {
        str(wheels): tree / str(wheels).lstrip("/"),
        str(tmp_path / "pypi"): tree / str(tmp_path / "pypi").lstrip("/"),
    }


def test_fakeroot_can_be_asked_for_as_any_user(tmp_path: Path, capsys: Any) -> None:
    ctx, out = _project(tmp_path), tmp_path / "img.sif"
    docker = "from mushin_box._image.spec import ImageSpec\nIMAGE = ImageSpec(base='d@sha256:%s')\n"
    (ctx / "image.py").write_text(docker % ("1" * 64))
    code, err = _build(ctx, out, capsys, "--dry-run", "--fakeroot")
    assert code == 0
    assert "apptainer build --fakeroot --force" in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_build_stops_its_tools_and_leaves_nothing(
    tmp_path: Path, signum: int
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    started = tmp_path / "started"
    # as mmdebstrap does: part of the tree is written, then a long step (its child: the
    # whole process group must go)
    slow = 'n=$(($# - 1)); eval "root=\\${$n}"; mkdir -p "$root/etc"; '
    slow += f"sleep 300 & echo $! > {started}.pid; touch {started}; wait"
    env = {**os.environ, "PATH": str(_tool_dir(tmp_path, mmdebstrap=slow))}
    argv = [sys.executable, "-m", "mushin_box", "build", str(ctx / "image.py"), "-o", str(out)]
    proc = subprocess.Popen(
        [*argv, "--context", str(ctx), "--backend", "native"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert started.exists(), proc.communicate(timeout=30)[1]
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in err
    assert _left(out) == []
    child = Path(f"/proc/{Path(f'{started}.pid').read_text().strip()}/stat")
    deadline = time.monotonic() + 30  # gone, or a zombie no one has reaped yet
    while child.exists() and child.read_text().split(") ")[-1][:1] != "Z":
        assert time.monotonic() < deadline, "the build's tool outlived the build"
        time.sleep(0.1)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs")
def test_a_full_disk_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "small" / "img.sif"
    out.parent.mkdir()
    mount, umount = shutil.which("mount") or "mount", shutil.which("umount") or "umount"
    subprocess.run([mount, "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(out.parent)], check=True)
    try:
        fills = 'n=$(($# - 1)); eval "root=\\${$n}"; mkdir -p "$root/etc"; '
        fills += 'head -c 4000000 /dev/zero > "$root/etc/big" || exit 1'  # head: "No space..."
        monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap=fills)))
        code, err = _build(ctx, out, capsys, "--backend", "native")
        assert code == 1
        line = err.strip().splitlines()[-1]
        assert "the disk filled up: free space under" in line and str(out.parent) in line
        assert _left(out) == []
    finally:
        subprocess.run([umount, str(out.parent)], check=False)


def _real_build(tmp_path: Path, capsys: Any, mirror: str, lock: str) -> tuple[int, str, Path]:
    """A real native build (mmdebstrap, apt, pip) of the small spec, with ``mirror`` and
    ``lock`` put in; skipped where it cannot run."""
    if shutil.which("mmdebstrap") is None or os.geteuid() != 0:
        pytest.skip("a real native build: mmdebstrap, as root")
    ctx = _project(tmp_path)
    (ctx / "image.py").write_text(SPEC.replace(repr(MIRROR), repr(mirror)))
    (ctx / "requirements.lock").write_text(lock)
    env = {**os.environ, "GIT_COMMITTER_DATE": "1700000000 +0000", "HOME": str(tmp_path)}
    argv = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "input"]
    subprocess.run(argv, cwd=ctx, env=env, check=True)
    out = tmp_path / "out" / "tiny.sif"
    code, err = _build(ctx, out, capsys, "--backend", "native")
    return code, err, out


def test_an_unreachable_mirror_is_one_line_and_leaves_nothing(tmp_path: Path, capsys: Any) -> None:
    code, err, out = _real_build(tmp_path, capsys, "http://127.0.0.1:9/debian", SIX + "\n")
    last = err.strip().splitlines()[-1]
    assert code == 1, err[-2000:]
    assert "the mirror http://127.0.0.1:9/debian cannot be reached" in last, last
    assert _left(out) == []


@pytest.mark.slow
@pytest.mark.timeout(600)  # apt and dpkg of a minimal Debian, then pip: 1-2 min
def test_a_lock_whose_hash_does_not_match_is_one_line_and_leaves_nothing(
    tmp_path: Path, capsys: Any
) -> None:
    wrong = SIX[: -len("0254")] + "0255"  # six 1.16.0, its wheel's sha256 off by one digit
    code, err, out = _real_build(tmp_path, capsys, MIRROR, wrong + "\n")
    last = err.strip().splitlines()[-1]
    assert code == 1, err[-2000:]
    assert "pip refused a file whose hash is not in the lock" in last, last
    assert _left(out) == []


def test_a_failure_is_named_by_the_line_only_it_prints() -> None:
    where, mirror = Path("/out"), "http://m/debian"
    ok_warning = "W: Download is performed unsandboxed as root as file 'x.deb' couldn't be "
    ok_warning += "accessed by user '_apt'. - pkgAcquire::Run (13: Permission denied)\n"
    broken = ok_warning + "E: Unable to correct problems, you have held broken packages.\n"
    assert explain_failure(broken, mirror=mirror, where=where) is None  # not a permission fault
    step = "in the image: /opt/venv/bin/python -m pip check failed (1): see above"
    assert explain_failure(ok_warning + step + "\n", mirror=mirror, where=where) == step
    pin = "E: Version '9.9' for 'python3' was not found\n"
    assert "an apt pin is not on the mirror http://m/debian" in str(
        explain_failure(pin, mirror=mirror, where=where)
    )


def test_over_a_base_image_singularity_d_follows_apptainers_rules(tmp_path: Path) -> None:
    sd = tmp_path / "root" / ".singularity.d"
    (sd / "env").mkdir(parents=True)
    base_env = '#!/bin/sh\nexport PATH=/opt/v/bin:"$PATH"\n'
    (sd / "env" / "90-environment.sh").write_text(base_env)
    (sd / "labels.json").write_text(json.dumps({"base.only": "b", "both": "base"}))
    (sd / "Singularity").write_text("Bootstrap: debootstrap\n")
    (sd / "runscript").write_text("#!/bin/sh\nexec base\n")
    plan = {
        "environment": ["export LAYER=thin"],
        "runscript": [],
        "test": [],
        "definition": "Bootstrap: localimage\n",
        "labels": {"both": "spec", "spec.only": "s"},
    }
    _singularity_d(tmp_path / "root", plan)
    # appended: the base's venv stays first on PATH
    assert (sd / "env" / "90-environment.sh").read_text() == base_env + "\nexport LAYER=thin\n"
    # kept, and the spec's set over them, as `apptainer build --force` (the other backend)
    labels = json.loads((sd / "labels.json").read_text())
    assert labels == {"base.only": "b", "both": "spec", "spec.only": "s"}
    assert (sd / "runscript").read_text() == "#!/bin/sh\nexec base\n"  # no runscript: kept
    assert (sd / "bootstrap_history" / "Apptainer0").read_text() == "Bootstrap: debootstrap\n"
    assert (sd / "Singularity").read_text() == "Bootstrap: localimage\n"


def test_a_base_whose_labels_are_not_a_json_object_fails_the_build_in_one_line(
    tmp_path: Path,
) -> None:
    sd = tmp_path / "root" / ".singularity.d"
    sd.mkdir(parents=True)
    (sd / "labels.json").write_text("{not json")
    plan = {"environment": [], "runscript": [], "test": [], "definition": "", "labels": {}}
    with pytest.raises(SystemExit) as failed:  # no traceback: the hook prints the line
        _singularity_d(tmp_path / "root", plan)
    line = str(failed.value)
    said = explain_failure(f"some output\n{line}\nmore", mirror="m", where=tmp_path)
    assert said == line and "labels.json is not a JSON object; fix the base" in line


def test_a_dir_dot_source_stages_the_directorys_contents_as_apptainer_copies_them(
    tmp_path: Path,
) -> None:
    context = tmp_path / "context"
    (context / "bin").mkdir(parents=True)
    (context / "bin" / "tool").write_text("#!/bin/sh\n")
    (context / "conf").mkdir()
    (context / "conf" / "site.yaml").write_text("a: 1\n")
    spec = ImageSpec(base=BASE, files={"bin/.": "/usr/local/bin/", "conf": "/etc/"})
    plan = _plan(spec, render_definition(spec), context, 0, tmp_path / "files")
    staged = {dest: [Path(p).name for p in sources] for sources, dest in plan["files"]}
    # `cp -fLr bin/. DEST` copies bin's contents; `cp -fLr conf DEST` the directory itself
    assert staged == {"/usr/local/bin/": ["tool"], "/etc/": ["conf"]}


def test_a_build_step_past_its_timeout_is_a_build_error_naming_it() -> None:
    with pytest.raises(BuildError, match=r"^sleep 30 ran past 0.2 s and was stopped: check"):
        run_bounded(["sleep", "30"], timeout=0.2, capture=True)

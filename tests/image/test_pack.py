# SPDX-License-Identifier: MIT
"""mushin_box._image.pack: the same tree content gives the same SIF bytes (whatever the path,
times, creation order or packing user); a changed file, mode, owner, link or time changes the
bytes, and first_difference names it."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

import mushin_box._image.pack as pack_module
from mushin_box._image.pack import (
    PackError,
    PackInputError,
    describe_check,
    first_difference,
    pack_tree,
)
from mushin_box._image.sif import file_sha256, read_sif_descriptors, read_sif_header

pytestmark = pytest.mark.skipif(shutil.which("mksquashfs") is None, reason="needs squashfs-tools")
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="chown and user namespace maps need root")
#: A tree a non-root user made reads as root's inside `unshare --map-root-user`.
USERNS: tuple[str, ...] = () if ROOT else ("unshare", "--map-root-user")
SDE = 1_700_000_000
DEFINITION = "Bootstrap: debootstrap\nOSVersion: bookworm\n"
SUBUID = 100_000  # the first subordinate id of the simulated non-root build

#: Runs a command in a new user namespace where host ids SUBUID.. read as 0.. (as in a tree
#: `mmdebstrap --mode=unshare` made), and the host's root as 65536 (to search the test's dirs).
ENTER_USERNS = f"""\
import ctypes, os, sys
r, w = os.pipe()
if os.fork() == 0:
    os.close(w)
    os.read(r, 1)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{{os.getppid()}}/{{name}}", "w") as handle:
            handle.write("0 {SUBUID} 65536\\n65536 0 1\\n")
    os._exit(0)
os.close(r)
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
    sys.exit("unshare(CLONE_NEWUSER) failed")
os.close(w)
os.wait()
os.setresgid(0, 0, 0)
os.setresuid(0, 0, 0)
os.execvp(sys.argv[1], sys.argv[1:])
"""

# (path, content or symlink target or None for a directory, mode, owner)
ENTRIES = [
    ("etc", None, 0o755, 0),
    ("etc/os-release", b"ID=debian\nVERSION_ID=12\n", 0o644, 0),
    ("etc/shadow", b"root:*:19000:0:99999:7:::\n", 0o640, 0),
    ("usr", None, 0o755, 0),
    ("usr/bin", None, 0o755, 0),
    ("usr/bin/tool", b"#!/bin/sh\necho tool\n", 0o755, 0),
    ("usr/bin/alias", "tool", 0o777, 0),
    ("usr/share", None, 0o755, 0),
    ("usr/share/read me", b"a name with a space\n", 0o644, 0),
    ("var", None, 0o755, 0),
    ("var/lib", None, 0o755, 0),
    ("var/lib/apt-owned", b"x" * 5000, 0o600, 100),
    ("var/empty", None, 0o700, 0),
]


def make_tree(top: Path, *, reverse: bool = False, mtime: int = 0, shift: int = 0) -> Path:
    """The tree of ENTRIES under ``top`` (files in reverse order, times ``mtime``, owners
    ``shift`` up: a subordinate-id tree)."""
    top.mkdir(parents=True)
    for path, content, mode, owner in sorted(ENTRIES, reverse=reverse):
        where = top / path
        where.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            where.mkdir(exist_ok=True)
        elif isinstance(content, str):
            where.symlink_to(content)
        else:
            where.write_bytes(content)
        if not isinstance(content, str):
            where.chmod(mode)
        if ROOT:
            os.lchown(where, owner + shift, owner + shift)
    if ROOT:
        os.lchown(top, shift, shift)
    top.chmod(0o755)
    for where in [*top.rglob("*"), top]:
        os.utime(where, (mtime, mtime), follow_symlinks=False)
    return top


def pack(tree: Path, out: Path, *, sde: int = SDE, userns: tuple[str, ...] = USERNS) -> str:
    return pack_tree(tree, out, source_date_epoch=sde, definition=DEFINITION, userns=userns)


def test_same_content_same_bytes(tmp_path: Path) -> None:
    """Different directories, mtimes and creation order: one sha256; the SIF's times are the
    SOURCE_DATE_EPOCH and its UUID follows from the content."""
    one = make_tree(tmp_path / "a" / "root", mtime=1_000_000)
    two = make_tree(tmp_path / "elsewhere" / "deeper" / "tree", reverse=True, mtime=2_000_000)
    digest = pack(one, tmp_path / "one.sif")
    assert pack(two, tmp_path / "two.sif") == digest == file_sha256(tmp_path / "one.sif")
    assert first_difference(tmp_path / "one.sif", tmp_path / "two.sif") is None
    assert describe_check(tmp_path / "one.sif", tmp_path / "two.sif") == "identical"
    header = read_sif_header(tmp_path / "one.sif")
    assert (header.created, header.modified) == (SDE, SDE) and not header.is_reproducible
    assert {(d.created, d.modified) for d in read_sif_descriptors(tmp_path / "one.sif")} == {
        (SDE, SDE)
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "elsewhere", "one.sif", "two.sif"]


def test_a_hole_and_written_zeros_give_the_same_bytes(tmp_path: Path) -> None:
    dense, sparse = make_tree(tmp_path / "dense"), make_tree(tmp_path / "sparse")
    (dense / "var/zeros").write_bytes(bytes(300_000))
    with open(sparse / "var/zeros", "wb") as handle:
        handle.truncate(300_000)
    assert pack(dense, tmp_path / "dense.sif") == pack(sparse, tmp_path / "sparse.sif")


def change_byte(tree: Path) -> None:
    (tree / "usr/bin/tool").write_bytes(b"#!/bin/sh\necho toil\n")


def change_mode(tree: Path) -> None:
    (tree / "etc/os-release").chmod(0o664)


def change_link(tree: Path) -> None:
    (tree / "usr/bin/alias").unlink()
    (tree / "usr/bin/alias").symlink_to("tool2")


def change_owner(tree: Path) -> None:
    os.chown(tree / "var/lib/apt-owned", 101, 100)


def change_spaced_name(tree: Path) -> None:
    (tree / "usr/share/read me").write_bytes(b"a name with a space!\n")


def add_file(tree: Path) -> None:
    (tree / "var/empty/new").write_bytes(b"")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (change_byte, "/usr/bin/tool: content "),
        (change_mode, "/etc/os-release: mode 0644 != 0664"),
        (change_link, "/usr/bin/alias: target tool != tool2"),
        pytest.param(
            change_owner, "/var/lib/apt-owned: owner 100:100 != 101:100", marks=needs_root
        ),
        (change_spaced_name, "/usr/share/read me: content "),
        (add_file, "/var/empty/new: only in b.sif"),
    ],
)
def test_a_change_changes_the_digest_and_is_named(tmp_path: Path, change, words: str) -> None:
    one, two = make_tree(tmp_path / "one"), make_tree(tmp_path / "two")
    change(two)
    assert pack(one, tmp_path / "a.sif") != pack(two, tmp_path / "b.sif")
    found = first_difference(tmp_path / "a.sif", tmp_path / "b.sif")
    assert found is not None and found.startswith(words), found
    assert describe_check(tmp_path / "a.sif", tmp_path / "b.sif") == f"differs: {found}"


def test_another_source_date_epoch_is_named_as_the_time_field(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "root")
    assert pack(tree, tmp_path / "a.sif") != pack(tree, tmp_path / "b.sif", sde=SDE + 1)
    found = first_difference(tmp_path / "a.sif", tmp_path / "b.sif")
    assert found == f"SIF header field created: {SDE} != {SDE + 1}"


def test_another_definition_is_named(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "root")
    pack(tree, tmp_path / "a.sif")
    pack_tree(tree, tmp_path / "b.sif", source_date_epoch=SDE, definition=DEFINITION + "X\n",
              userns=USERNS)  # fmt: skip
    found = first_difference(tmp_path / "a.sif", tmp_path / "b.sif")
    assert found == "SIF object 1 (Def.FILE) differs at line 3"


@pytest.fixture
def searchable(tmp_path: Path):
    """A directory every user can search (pytest's tmp_path sits below 0700 ones)."""
    top = Path(tempfile.mkdtemp(prefix="mushin-pack-"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top)


@needs_root
def test_another_user_packs_the_same_bytes(searchable: Path) -> None:
    """mksquashfs run as `nobody` gives root's bytes; a file it may not read fails the pack
    (mksquashfs would otherwise store it empty and exit 0), leaving nothing."""
    tree = make_tree(searchable / "root")
    (tree / "var/empty").chmod(0o755)
    (tree / "var/lib/apt-owned").chmod(0o644)
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    with pytest.raises(PackError, match="mksquashfs failed .*etc/shadow"):
        pack(tree, searchable / "nobody.sif", userns=nobody)
    assert sorted(p.name for p in searchable.iterdir()) == ["root"]
    (tree / "etc/shadow").chmod(0o644)
    nobody_digest = pack(tree, searchable / "nobody.sif", userns=nobody)
    assert nobody_digest == pack(tree, searchable / "root.sif")


@needs_root
def test_a_subuid_tree_packed_in_its_namespace_gives_roots_bytes(tmp_path: Path) -> None:
    """A tree owned by subordinate ids (a non-root mmdebstrap's) packed in the namespace that
    maps them back gives the bytes of the same tree root made; packed outside it is refused."""
    root_made = make_tree(tmp_path / "by-root")
    user_made = make_tree(tmp_path / "by-user", shift=SUBUID)
    helper = tmp_path / "enter-userns.py"
    helper.write_text(ENTER_USERNS)
    with pytest.raises(PackInputError, match=r"reads as owned by 100000/100000, not 0/0"):
        pack(user_made, tmp_path / "outside.sif")
    assert not (tmp_path / "outside.sif").exists()
    userns = (sys.executable, str(helper))
    assert pack(user_made, tmp_path / "user.sif", userns=userns) == pack(
        root_made, tmp_path / "root.sif"
    )


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PackInputError, match="is not a directory"):
        pack(tmp_path / "missing", tmp_path / "x.sif")
    tree = make_tree(tmp_path / "root")
    with pytest.raises(PackInputError, match="does not exist"):
        pack(tree, tmp_path / "no" / "x.sif")
    with pytest.raises(PackInputError, match="is a directory: write the SIF elsewhere"):
        pack(tree, tmp_path)
    with pytest.raises(PackInputError, match="unsigned 32-bit"):
        pack(tree, tmp_path / "x.sif", sde=-1)


def test_a_step_that_hangs_is_stopped_with_its_whole_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pack_module, "STEP_TIMEOUT_S", 0.5)
    child = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {child}; wait"
    start = time.monotonic()
    with pytest.raises(PackError, match="ran past 0.5 s and was stopped"):
        pack_module._run(["sh", "-c", script], "mksquashfs")
    assert time.monotonic() - start < 30
    pid = int(child.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )

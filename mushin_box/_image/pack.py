# SPDX-License-Identifier: MIT
"""Pack a root file system tree as a bit-reproducible SIF, and name what makes two SIFs differ.

:func:`pack_tree` squashes a directory with ``mksquashfs`` and wraps it with the kit's SIF
writer: the same tree content gives the same bytes, whatever its path, its files' times,
the order it was filled in, the user who packs it or the day. Of :data:`MKSQUASHFS_FLAGS`:
``-no-xattrs`` (host SELinux labels; Apptainer mounts ``nosuid``, where capabilities do
nothing), ``-exit-on-error`` (else an unreadable file is stored empty), ``-no-sparse`` (a
hole and written zeros give the same bytes), ``-one-file-system`` (nothing still mounted),
``-comp lz4`` (fast to unpack; its bytes depend on the squashfs-tools and lz4 versions).

Owners are kept as the tree's builder saw them: a tree made in a user namespace is owned
on the host by subordinate ids, so mksquashfs runs inside it (``userns``), writing through
an inherited file descriptor; a root that does not read as 0:0 is refused. The SIF's times
are ``SOURCE_DATE_EPOCH`` and its UUID a ``uuid5`` of its objects' sha256.

:func:`first_difference` compares two SIFs: the fields that do not follow from the content
first, then the objects, then the squashfs files (streamed by ``unsquashfs -pf``).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.procs import run_bounded
from mushin_box._image.sif import (
    PARTITION,
    SifDescriptor,
    file_sha256,
    read_sif_descriptors,
    read_sif_header,
    read_sif_object,
    write_sif,
)

MKSQUASHFS_FLAGS = tuple(
    "-noappend -reproducible -no-xattrs -no-sparse -exit-on-error -one-file-system -comp lz4 "
    "-quiet -no-progress".split()
)
#: The namespace of the SIF UUIDs this module derives from an image's content.
UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://mushin-box/sif-content")
_DATA_MARK = b"# START OF DATA - DO NOT MODIFY\n"
_ENTRY = re.compile(rb"((?:\\.|[^ \\])+) ([BCDILRS]) (.*)\n", re.DOTALL)  # name, type, fields
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)
_MAX_EPOCH = 2**32 - 1  # squashfs stores unsigned 32-bit times
#: the longest mksquashfs may take (a tree of many GB on a slow disk) before it is stopped
STEP_TIMEOUT_S = 4 * 3600.0


class PackError(MushinBoxError, RuntimeError):
    """A pack step failed, or a tool it needs is missing; the message names the fix."""


class PackInputError(MushinBoxError, ValueError):
    """``pack_tree`` was given a tree, an output path or a time it cannot use."""


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise PackError(f"{name} was not found on PATH: install the squashfs-tools package")
    return found


def _run(argv: Sequence[str], what: str, pass_fds: tuple[int, ...] = ()) -> str:
    """Run ``argv`` (its process group stopped whole past :data:`STEP_TIMEOUT_S`); its
    stdout, or a PackError with the last line of its stderr."""
    try:
        done = run_bounded(argv, timeout=STEP_TIMEOUT_S, capture=True, pass_fds=pass_fds)
    except subprocess.TimeoutExpired:
        raise PackError(f"{what} ran past {STEP_TIMEOUT_S:g} s and was stopped") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["(no message)"]
        raise PackError(f"{what} failed (exit {done.returncode}): {lines[-1]}")
    return done.stdout


def pack_tree(
    tree: Path,
    out: Path,
    *,
    source_date_epoch: int,
    definition: str | None = None,
    metadata: bytes | None = None,
    userns: Sequence[str] = (),
) -> str:
    """Squash the directory ``tree`` and wrap it as a SIF at ``out``; return the SIF's sha256.
    A failed pack leaves nothing at ``out``; ``userns`` enters the tree's user namespace."""
    tree, out = Path(tree), Path(out)
    if not tree.is_dir():
        raise PackInputError(f"{tree} is not a directory: pass the root file system to pack")
    if not out.parent.is_dir():
        raise PackInputError(f"{out.parent} does not exist: create it, or write the SIF elsewhere")
    if out.is_dir() or not os.access(out.parent, os.W_OK | os.X_OK):
        what = "is a directory" if out.is_dir() else "is in a directory this user cannot write"
        raise PackInputError(f"{out} {what}: write the SIF elsewhere")
    if not 0 <= source_date_epoch <= _MAX_EPOCH:
        raise PackInputError(
            f"SOURCE_DATE_EPOCH {source_date_epoch} is outside 0..{_MAX_EPOCH}: squashfs stores "
            "unsigned 32-bit times: give a time in that range"
        )
    mksquashfs, unsquashfs = _tool("mksquashfs"), _tool("unsquashfs")
    epoch = str(source_date_epoch)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        squashfs = Path(tmp) / "root.squashfs"
        fd = os.open(squashfs, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:  # writable to the namespace's root through the fd (the directory is 0700)
            os.fchmod(fd, 0o666)
            argv = [*userns, mksquashfs, str(tree), f"/proc/self/fd/{fd}", *MKSQUASHFS_FLAGS]
            _run([*argv, "-all-time", epoch, "-mkfs-time", epoch], "mksquashfs", pass_fds=(fd,))
        finally:
            os.close(fd)
        top = _run([unsquashfs, "-lln", "-max-depth", "0", str(squashfs)], "unsquashfs -lln")
        owner = (top.split() or ["", "?"])[1]
        if owner != "0/0":
            raise PackInputError(
                f"{tree} reads as owned by {owner}, not 0/0: pack it in the user namespace "
                "that made it (userns=...), so its files keep their owners"
            )
        objects = (None if definition is None else definition.encode(), metadata)
        hashes = [hashlib.sha256(o).hexdigest() if o is not None else "-" for o in objects]
        sif = Path(tmp) / out.name
        write_sif(
            sif,
            squashfs,
            definition=objects[0],
            metadata=metadata,
            image_uuid=uuid.uuid5(UUID_NAMESPACE, " ".join([file_sha256(squashfs), *hashes])),
            created=source_date_epoch,
        )
        digest = file_sha256(sif)
        os.replace(sif, out)
    return digest


def _same_bytes(a: Path, b: Path, offsets: tuple[int, int] = (0, 0), size: int = -1) -> bool:
    """Whether ``size`` bytes (default: the whole files, of equal size) at ``offsets`` match."""
    if size < 0:
        size = a.stat().st_size
        if b.stat().st_size != size:
            return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        fa.seek(offsets[0])
        fb.seek(offsets[1])
        while size > 0:
            block = fa.read(min(size, 1 << 20))
            if not block or block != fb.read(len(block)):
                return False
            size -= len(block)
    return True


def _field_difference(what: str, x: object, y: object, fields: Sequence[str]) -> str | None:
    for name in fields:
        va, vb = getattr(x, name, None), getattr(y, name, None)
        if va != vb:
            return f"{what} field {name}: {va!r} != {vb!r}"
    return None


def first_difference(a: Path, b: Path) -> str | None:
    """``None`` when the SIFs ``a`` and ``b`` are byte-identical; else one line naming the
    first difference (a field, an object, a squashfs file, else ``"squashfs metadata"``),
    the fields that follow from the content (UUID, offsets, sizes) last: it names the cause."""
    a, b = Path(a), Path(b)
    if _same_bytes(a, b):
        return None
    ha, hb = read_sif_header(a), read_sif_header(b)
    fields = ("launch_script", "version", "arch", "created", "modified", "descriptors_total")
    if found := _field_difference("SIF header", ha, hb, fields):
        return found
    da, db = read_sif_descriptors(a), read_sif_descriptors(b)
    names_a, names_b = [d.datatype_name for d in da], [d.datatype_name for d in db]
    if names_a != names_b:
        return f"SIF objects: {names_a} != {names_b}"
    named = [f"SIF descriptor {d.id} ({d.datatype_name})" for d in da]
    pairs = list(zip(named, da, db, strict=True))
    fields = ("id", "group_id", "linked_id", "name", "created", "modified", "extra")
    late = ("uuid", "data_size", "offset", "size")
    checks = itertools.chain(  # generators: nothing after the first difference is compared
        (_field_difference(what, x, y, fields) for what, x, y in pairs),
        (_object_difference(a, b, x, y) for _, x, y in pairs),
        (_field_difference(what, x, y, late) for what, x, y in [("SIF header", ha, hb), *pairs]),
    )
    return next(filter(None, checks), "squashfs metadata")


def _object_difference(a: Path, b: Path, x: SifDescriptor, y: SifDescriptor) -> str | None:
    if x.datatype == PARTITION:
        return _squashfs_difference(a, x, b, y)
    blob_a, blob_b = read_sif_object(a, x), read_sif_object(b, y)
    if blob_a == blob_b:
        return None
    what = f"SIF object {x.id} ({x.datatype_name}{' ' + x.name if x.name else ''})"
    lines_a, lines_b = blob_a.splitlines(), blob_b.splitlines()
    pairs = enumerate(zip(lines_a, lines_b, strict=False))
    line = next((i for i, (p, q) in pairs if p != q), min(len(lines_a), len(lines_b)))
    return f"{what} differs at line {line + 1}"


def _squashfs_difference(a: Path, x: SifDescriptor, b: Path, y: SifDescriptor) -> str | None:
    if x.size == y.size and _same_bytes(a, b, (x.offset, y.offset), x.size):
        return None
    with ThreadPoolExecutor(2) as pool:  # two unsquashfs processes at once
        files_a, files_b = pool.map(_squashfs_files, (a, b), (x.offset, y.offset))
    for path in sorted(files_a.keys() | files_b.keys()):
        entry_a, entry_b = files_a.get(path), files_b.get(path)
        if entry_a is None or entry_b is None:
            return f"/{path}: only in {(b if entry_a is None else a).name}"
        for name in ("type", "content", "target", "mode", "owner", "mtime"):
            va, vb = entry_a.get(name), entry_b.get(name)
            if va != vb:
                if name == "content":
                    va, vb = f"sha256:{str(va)[:12]}", f"sha256:{str(vb)[:12]}"
                return f"/{path}: {name} {va} != {vb}"
    return None


def _squashfs_files(sif: Path, offset: int) -> dict[str, dict[str, str]]:
    """Path -> {type, mtime, mode, owner, content (sha256), target} of each file."""
    argv = [_tool("unsquashfs"), "-quiet", "-no-progress", "-o", str(offset)]
    argv += ["-pf", "/dev/stdout", str(sif)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        files, data = _parse_pseudo(proc.stdout)
        by_offset: dict[tuple[int, int], str] = {}
        position = 0
        for start, size in sorted(set(data.values())):
            if start < position:  # overlaps an earlier file's bytes: never written so
                raise PackError(f"{sif}: unsquashfs -pf gave overlapping file data")
            proc.stdout.read(start - position)
            by_offset[start, size] = _hash_stream(proc.stdout, size)
            position = start + size
        proc.stdout.read()
        error = proc.stderr.read().decode(errors="replace").strip()
    if proc.returncode != 0:
        raise PackError(f"unsquashfs could not read {sif}: {error or proc.returncode}")
    for path, extent in data.items():
        files[path]["content"] = by_offset[extent]
    return files


def _hash_stream(stream: IO[bytes], size: int) -> str:
    digest = hashlib.sha256()
    while size > 0:
        block = stream.read(min(size, 1 << 20))
        if not block:
            raise PackError("unsquashfs -pf ended inside a file's data")
        digest.update(block)
        size -= len(block)
    return digest.hexdigest()


def _parse_pseudo(
    stream: IO[bytes],
) -> tuple[dict[str, dict[str, str]], dict[str, tuple[int, int]]]:
    """Each file's fields, and each regular file's ``(start, size)`` in the data, from the
    definitions before the data. unsquashfs escapes a space in a name but not a newline: a
    line that is no definition starts a name the next line ends."""
    kinds = {"D": "directory", "R": "file", "S": "symlink", "L": "hard link", "I": "fifo/socket"}
    kinds |= {"B": "block device", "C": "char device"}
    files: dict[str, dict[str, str]] = {}
    data: dict[str, tuple[int, int]] = {}
    pending = b""
    for raw in stream:
        if raw == _DATA_MARK:
            stream.readline()  # the '#' line after the mark
            break
        found = _ENTRY.fullmatch(pending + raw)
        if found is None:
            pending = b"" if raw.startswith(b"#") and not pending else pending + raw
            continue
        pending = b""
        path = os.fsdecode(_ESCAPE.sub(rb"\1", found[1])).strip("/")
        kind, fields = found[2].decode(), found[3]
        entry = files[path] = {"type": kinds[kind]}
        if kind == "L":
            entry["target"] = os.fsdecode(fields)
            continue
        mtime, mode, uid, gid, *more = fields.split(b" ", 4)
        entry |= {"mtime": mtime.decode(), "mode": "0" + mode.decode()}
        entry["owner"] = f"{uid.decode()}:{gid.decode()}"
        tail = more[0] if more else b""
        if kind == "R":
            size, start = tail.split()[:2]
            data[path] = (int(start), int(size))
        elif tail:
            entry["target"] = os.fsdecode(tail)
    return files, data


def describe_check(built: Path, rebuilt: Path) -> str:
    """What ``build --check`` prints: ``"identical"``, or the first difference."""
    found = first_difference(built, rebuilt)
    return "identical" if found is None else f"differs: {found}"

# SPDX-License-Identifier: MIT
"""A dependency-free reader and writer of the Singularity Image Format (SIF) Apptainer builds.

Only the header, the descriptors and (on request) one object are read: nothing is mounted
and no Apptainer is needed. :func:`write_sif` lays out objects as Apptainer's ``sif``
library does: the descriptor table at 4096 with 48 slots, all objects in group 1, the
squashfs partition aligned to 4096 (its ``size_with_padding`` counts the padding). Unsigned.

Layout (little-endian; ``apptainer/sif`` ``pkg/sif/sif.go`` and ``descriptor.go``): the
128-byte header is ``<32s10s3s3s16s8q``: launch script, magic ``SIF_MAGIC\\0``, version
``01\\0``, architecture code (``02\\0`` = amd64), UUID (all zero for reproducible builds),
then ``_HEADER_NUMBERS``. Each descriptor is ``<iBIIIqqqqqqq128s384s``: data type, used
flag, id, group id, linked id, ``_DESCRIPTOR_NUMBERS``, uid, gid, name, extra. Both are
checked byte for byte against ``tests/golden/siftool-2.8.3.sif`` (bookworm's ``siftool``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import shutil
import struct
import time
import uuid
from pathlib import Path
from typing import BinaryIO

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.sidecars import StrPath
from mushin_box._core.targets import public

HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<iBIIIqqqqqqq128s384s")
HEADER_SIZE = HEADER.size  # 128
DESCRIPTOR_SIZE = DESCRIPTOR.size  # 585
_HEADER_NUMBERS = (
    "created modified descriptors_free descriptors_total descriptors_offset descriptors_size "
    "data_offset data_size"
).split()
_DESCRIPTOR_NUMBERS = ("offset", "size", "size_with_padding", "created", "modified")

MAGIC = b"SIF_MAGIC\x00"
SUPPORTED_VERSIONS = frozenset({"01"})
GROUP_MASK = 0xF000_0000

#: SIF architecture codes (``pkg/sif/arch.go``, ``"00"`` on) -> Go names: the library's
#: whole table; add a code only once it assigns one (loong64 is ``00``, "unknown").
_ARCH_NAMES = "unknown 386 amd64 arm arm64 ppc64 ppc64le mips mipsle mips64 mips64le s390x riscv64"
SIF_ARCHES: dict[str, str] = {f"{code:02}": name for code, name in enumerate(_ARCH_NAMES.split())}
#: SIF data object types (``pkg/sif/sif.go``, ``0x4001`` on, in order) -> the names
#: ``siftool list`` prints.
SIF_DATATYPES: dict[int, str] = dict(
    enumerate(
        "Def.FILE|Env.Vars|JSON.Labels|FS|Signature|JSON.Generic|Generic/Raw|"
        "Cryptographic Message|SBOM|OCI.RootIndex|OCI.Blob".split("|"),
        start=0x4001,
    )
)

# plus seconds, not fromtimestamp: Go's zero time (year 1, reproducible builds) is out of range
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
LAUNCH_SCRIPT = "#!/usr/bin/env run-singularity\n"
DESCRIPTOR_OFFSET = 4096
DESCRIPTOR_SLOTS = 48
FS_ALIGN = 4096
DEF_FILE, PARTITION, JSON_GENERIC = 0x4001, 0x4004, 0x4006
_ROOT_PARTITION = (1, 2)  # squashfs, primary system
_PARTITION = struct.Struct("<ii3s")
_CODES = {name: code for code, name in SIF_ARCHES.items()}
_MACHINES = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm"}


@public
class SifFormatError(MushinBoxError, ValueError):
    """The file is not a SIF image this reader understands (bad magic, truncated, ...):
    ``path``, what is wrong (``detail``) and whether the file is cut short (``truncated``),
    apart, so a caller words its own message from them."""

    def __init__(self, path: str | os.PathLike[str], detail: str, *, truncated: bool = False):
        self.path, self.detail, self.truncated = str(path), detail, truncated
        super().__init__(f"{self.path}: {self.text}")

    @property
    def text(self) -> str:
        """The message without the path."""
        return f"truncated SIF file: {self.detail}" if self.truncated else self.detail


def _cstr(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", errors="replace")


@public
@attrs.frozen(kw_only=True)
class SifHeader:
    """The SIF global header (the first 128 bytes of the file; layout in the module docstring).

    ``arch`` is the Go name of ``arch_code`` (``"amd64"``, ... or ``"unknown"``); ``uuid`` is
    random per build and nil for reproducible builds; ``created`` and ``modified`` are Unix
    seconds (``-62135596800``, Go's zero time, for reproducible builds).
    """

    launch_script: str
    version: str
    arch_code: str
    arch: str
    uuid: uuid.UUID
    created: int
    modified: int
    descriptors_free: int
    descriptors_total: int
    descriptors_offset: int
    descriptors_size: int
    data_offset: int
    data_size: int

    @property
    def created_at(self) -> _dt.datetime:
        """``created`` as an aware UTC datetime."""
        return _EPOCH + _dt.timedelta(seconds=self.created)

    @property
    def modified_at(self) -> _dt.datetime:
        """``modified`` as an aware UTC datetime."""
        return _EPOCH + _dt.timedelta(seconds=self.modified)

    @property
    def descriptors_used(self) -> int:
        """Number of descriptor slots in use."""
        return self.descriptors_total - self.descriptors_free

    @property
    def is_reproducible(self) -> bool:
        """True when the UUID is nil, as Apptainer >= 1.5 writes with ``SOURCE_DATE_EPOCH``."""
        return self.uuid.int == 0


@attrs.frozen(kw_only=True)
class SifDescriptor:
    """One used SIF object descriptor, its fields in table order (module docstring);
    ``datatype_name`` as ``siftool list`` prints it, ``group_id``/``linked_id`` 0 for none."""

    datatype: int
    datatype_name: str
    id: int
    group_id: int
    linked_id: int
    offset: int
    size: int
    size_with_padding: int
    created: int
    modified: int
    name: str
    extra: bytes = attrs.field(repr=False)


def _read_exact(handle: BinaryIO, path: Path, offset: int, size: int) -> bytes:
    handle.seek(offset)
    data = handle.read(size)
    if len(data) != size:
        raise SifFormatError(
            path, f"wanted {size} bytes at offset {offset}, got {len(data)}", truncated=True
        )
    return data


def _parse_header(raw: bytes, path: Path) -> SifHeader:
    launch, magic, version, arch, ident, *numbers = HEADER.unpack(raw)
    if magic != MAGIC:
        raise SifFormatError(path, f"not a SIF image (magic {magic!r}, want {MAGIC!r})")
    version_s = _cstr(version)
    if version_s not in SUPPORTED_VERSIONS:
        raise SifFormatError(
            path,
            f"unsupported SIF version {version_s!r} (this reader knows "
            f"{sorted(SUPPORTED_VERSIONS)})",
        )
    arch_code = _cstr(arch)
    return SifHeader(
        launch_script=_cstr(launch),
        version=version_s,
        arch_code=arch_code,
        arch=SIF_ARCHES.get(arch_code, "unknown"),
        uuid=uuid.UUID(bytes=ident),
        **dict(zip(_HEADER_NUMBERS, numbers, strict=True)),
    )


@public
def read_sif_header(path: StrPath) -> SifHeader:
    """Read the global header of a SIF image.

    A file shorter than a header, with another magic or a version this reader does not
    know is a :class:`SifFormatError`.

    >>> import struct, tempfile, uuid
    >>> raw = struct.pack("<32s10s3s3s16s8q", b"#!/usr/bin/env run-singularity\\n",
    ...                   b"SIF_MAGIC\\0", b"01\\0", b"02\\0", uuid.UUID(int=7).bytes,
    ...                   0, 0, 48, 48, 4096, 0, 32768, 0)
    >>> path = Path(tempfile.mkdtemp()) / "tiny.sif"
    >>> _ = path.write_bytes(raw)
    >>> header = read_sif_header(path)
    >>> header.arch, header.uuid, header.descriptors_used
    ('amd64', UUID('00000000-0000-0000-0000-000000000007'), 0)
    """
    p = Path(path)
    with open(p, "rb") as handle:
        raw = _read_exact(handle, p, 0, HEADER_SIZE)
    return _parse_header(raw, p)


def read_sif_descriptors(path: StrPath) -> tuple[SifDescriptor, ...]:
    """The used object descriptors of a SIF image, in table order; a :class:`SifFormatError`
    when the table is truncated or inconsistent, or an object lies past the file's end.

    >>> import struct, tempfile
    >>> header = struct.pack("<32s10s3s3s16s8q", b"", b"SIF_MAGIC\\0", b"01\\0", b"02\\0",
    ...                      bytes(16), 0, 0, 0, 1, 128, 585, 713, 3)
    >>> descr = struct.pack("<iBIIIqqqqqqq128s384s", 0x4001, 1, 1, 0xF0000000, 0,
    ...                     713, 3, 3, 0, 0, 0, 0, b"", b"")
    >>> path = Path(tempfile.mkdtemp()) / "one.sif"
    >>> _ = path.write_bytes(header + descr + b"abc")
    >>> [(d.datatype_name, d.id, d.size) for d in read_sif_descriptors(path)]
    [('Def.FILE', 1, 3)]
    >>> read_sif_object(path, read_sif_descriptors(path)[0])
    b'abc'
    """
    p = Path(path)
    with open(p, "rb") as handle:
        header = _parse_header(_read_exact(handle, p, 0, HEADER_SIZE), p)
        total = header.descriptors_total
        if total < 0 or header.descriptors_offset < HEADER_SIZE or total > 1 << 16:
            raise SifFormatError(p, f"implausible descriptor table in header: {header}")
        table = _read_exact(handle, p, header.descriptors_offset, total * DESCRIPTOR_SIZE)
        file_size = os.fstat(handle.fileno()).st_size
    out: list[SifDescriptor] = []
    for fields in DESCRIPTOR.iter_unpack(table):
        dtype, used, ident, group, link, *numbers, _, _, name, extra = fields
        if used:
            out.append(
                SifDescriptor(
                    datatype=dtype,
                    datatype_name=SIF_DATATYPES.get(dtype, "Unknown"),
                    id=ident,
                    group_id=group & ~GROUP_MASK & 0xFFFF_FFFF,
                    linked_id=link & ~GROUP_MASK & 0xFFFF_FFFF,
                    name=_cstr(name),
                    extra=extra,
                    **dict(zip(_DESCRIPTOR_NUMBERS, numbers, strict=True)),
                )
            )
    if len(out) != header.descriptors_used:
        raise SifFormatError(
            p,
            f"header says {header.descriptors_used} descriptors are used, the table has {len(out)}",
        )
    for d in out:
        what = f"object {d.id} ({d.datatype_name})"
        if d.offset < 0 or d.size < 0:
            raise SifFormatError(p, f"corrupt SIF: {what} has offset {d.offset}, size {d.size}")
        if d.offset + d.size > file_size:
            raise SifFormatError(
                p,
                f"{what} spans bytes {d.offset}-{d.offset + d.size}, the file ends at byte "
                f"{file_size}",
                truncated=True,
            )
    return tuple(out)


def read_sif_object(path: StrPath, descriptor: SifDescriptor) -> bytes:
    """The bytes of one data object; example in :func:`read_sif_descriptors`."""
    p = Path(path)
    with open(p, "rb") as handle:
        return _read_exact(handle, p, descriptor.offset, descriptor.size)


def root_squashfs_offset(path: StrPath) -> int:
    """Where a SIF's squashfs root file system starts (``unsquashfs -o`` reads it in place);
    a :class:`SifFormatError` for none (an ext3 or encrypted root, no partition)."""
    for d in read_sif_descriptors(path):  # a partition's extra opens with fs and part type
        if d.datatype == PARTITION and _PARTITION.unpack_from(d.extra)[:2] == _ROOT_PARTITION:
            return d.offset
    raise SifFormatError(path, "no squashfs root file system (an ext3 or encrypted root?)")


def file_sha256(path: StrPath) -> str:
    """Hex sha256 of a file, read in chunks (images are many GiB).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x"
    >>> _ = path.write_bytes(b"abc")
    >>> file_sha256(path)[:16]
    'ba7816bf8f01cfea'
    """
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def host_arch() -> str:
    """Go name of this machine's architecture (``"amd64"``, ``"arm64"``, ...)."""
    machine = platform.machine().lower()
    return _MACHINES.get(machine, machine if machine in _CODES else "unknown")


def write_sif(
    path: StrPath,
    squashfs: StrPath | bytes,
    *,
    definition: bytes | None = None,
    metadata: bytes | None = None,
    image_uuid: uuid.UUID | None = None,
    created: int | None = None,
    arch: str | None = None,
    launch_script: str = LAUNCH_SCRIPT,
) -> None:
    """Write a SIF of ``definition`` (``Def.FILE``), ``metadata`` (``inspect-metadata.json``),
    each left out when ``None``, and ``squashfs`` (a file, streamed, or bytes). Defaults: a
    random ``image_uuid``, ``created`` (every time field) now, ``arch`` :func:`host_arch`.

    >>> import tempfile
    >>> sif = os.path.join(tempfile.mkdtemp(), "tiny.sif")
    >>> write_sif(sif, b"hsqs" + bytes(60), definition=b"Bootstrap: scratch\\n", arch="arm64")
    >>> read_sif_header(sif).arch
    'arm64'
    >>> [(d.datatype_name, d.offset, d.size) for d in read_sif_descriptors(sif)]
    [('Def.FILE', 32176, 19), ('FS', 32768, 64)]
    """
    arch = arch or host_arch()
    if arch not in _CODES:
        raise ValueError(f"unknown SIF architecture {arch!r}: one of {sorted(_CODES)}")
    code = _CODES[arch].encode() + b"\0"
    created = int(time.time()) if created is None else created
    image_uuid = uuid.uuid4() if image_uuid is None else image_uuid
    fs_size = len(squashfs) if isinstance(squashfs, bytes) else os.path.getsize(squashfs)
    objects: list[tuple[int, int, str, bytes, int]] = []  # type, size, name, extra, align
    if definition is not None:
        objects.append((DEF_FILE, len(definition), "", b"", 0))
    if metadata is not None:
        objects.append((JSON_GENERIC, len(metadata), "inspect-metadata.json", b"", 0))
    objects.append((PARTITION, fs_size, "", _PARTITION.pack(*_ROOT_PARTITION, code), 1))
    data_offset = DESCRIPTOR_OFFSET + DESCRIPTOR_SLOTS * DESCRIPTOR_SIZE
    table, position, padding = bytearray(DESCRIPTOR_SLOTS * DESCRIPTOR_SIZE), data_offset, 0
    for index, (dtype, size, name, extra, align) in enumerate(objects):
        padding = (-position) % FS_ALIGN if align else 0
        fields = (dtype, 1, index + 1, GROUP_MASK | 1, 0, position + padding, size)
        times = (size + padding, created, created, 0, 0, name.encode(), extra)
        DESCRIPTOR.pack_into(table, index * DESCRIPTOR_SIZE, *fields, *times)
        position += padding + size
    identity = (launch_script.encode(), MAGIC, b"01\0", code, image_uuid.bytes, created, created)
    slots = (DESCRIPTOR_SLOTS - len(objects), DESCRIPTOR_SLOTS, DESCRIPTOR_OFFSET, len(table))
    header = HEADER.pack(*identity, *slots, data_offset, position - data_offset)
    with open(path, "wb") as out:
        out.write(header + bytes(DESCRIPTOR_OFFSET - HEADER_SIZE) + table)
        for blob in (definition, metadata):
            if blob is not None:
                out.write(blob)
        out.write(bytes(padding))  # the partition's, the last object
        if isinstance(squashfs, bytes):
            out.write(squashfs)
        else:
            with open(squashfs, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 20)
        if out.tell() != position:
            raise OSError(f"{path}: {squashfs!r} changed size while it was copied")

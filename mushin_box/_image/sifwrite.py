# SPDX-License-Identifier: MIT
"""Write a SIF image: an optional definition file, optional inspect metadata and a squashfs
root file system, laid out as Apptainer's ``sif`` library lays them out.

The layout is the one :mod:`mushin_box._image.sif` reads: the 128-byte header, zero padding
to the descriptor table at 4096, 48 descriptor slots of 585 bytes, then the data objects in
descriptor order. All objects are in group 1; the file system partition (squashfs, system,
primary) is aligned to 4096 bytes and its ``size_with_padding`` counts the padding before it.
With the same inputs this writes the bytes ``siftool`` 2.8.3 writes (tests check it against
``tests/golden/siftool-2.8.3.sif``). Nothing is signed and nothing is mounted.
"""

from __future__ import annotations

import os
import platform
import shutil
import struct
import time
import uuid as _uuid

from mushin_box._core.sidecars import StrPath
from mushin_box._image.sif import (
    DESCRIPTOR,
    DESCRIPTOR_SIZE,
    GROUP_MASK,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    SIF_ARCHES,
)

__all__ = ["host_arch", "write_sif"]

LAUNCH_SCRIPT = "#!/usr/bin/env run-singularity\n"
DESCRIPTOR_OFFSET = 4096
DESCRIPTOR_SLOTS = 48
FS_ALIGN = 4096
DEF_FILE, PARTITION, JSON_GENERIC = 0x4001, 0x4004, 0x4006
FS_SQUASHFS, PART_PRIMSYS = 1, 2
_PARTITION = struct.Struct("<ii3s")
_CODES = {name: code for code, name in SIF_ARCHES.items()}
_MACHINES = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm"}


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
    image_uuid: _uuid.UUID | None = None,
    created: int | None = None,
    arch: str | None = None,
    launch_script: str = LAUNCH_SCRIPT,
) -> None:
    """Write a SIF file holding ``definition``, ``metadata`` and the ``squashfs`` partition.

    ``squashfs`` is a file (streamed) or its bytes; ``definition`` (``Def.FILE``) and
    ``metadata`` (``JSON.Generic`` ``inspect-metadata.json``) are left out when ``None``.
    ``image_uuid`` defaults to a random one (``uuid.UUID(int=0)`` for a reproducible file),
    ``created`` (the header's and every descriptor's Unix seconds) to now, ``arch`` to
    :func:`host_arch`.

    >>> import tempfile
    >>> from mushin_box._image.sif import read_sif_descriptors, read_sif_header
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
    image_uuid = _uuid.uuid4() if image_uuid is None else image_uuid
    fs_size = len(squashfs) if isinstance(squashfs, bytes) else os.path.getsize(squashfs)
    objects: list[tuple[int, int, str, bytes, int]] = []  # type, size, name, extra, align
    if definition is not None:
        objects.append((DEF_FILE, len(definition), "", b"", 0))
    if metadata is not None:
        objects.append((JSON_GENERIC, len(metadata), "inspect-metadata.json", b"", 0))
    objects.append((PARTITION, fs_size, "", _PARTITION.pack(FS_SQUASHFS, PART_PRIMSYS, code), 1))
    data_offset = DESCRIPTOR_OFFSET + DESCRIPTOR_SLOTS * DESCRIPTOR_SIZE
    table, paddings, position = bytearray(DESCRIPTOR_SLOTS * DESCRIPTOR_SIZE), [], data_offset
    for index, (dtype, size, name, extra, align) in enumerate(objects):
        padding = (-position) % FS_ALIGN if align else 0
        paddings.append(padding)
        fields = (dtype, 1, index + 1, GROUP_MASK | 1, 0, position + padding, size)
        times = (size + padding, created, created, 0, 0, name.encode(), extra)
        DESCRIPTOR.pack_into(table, index * DESCRIPTOR_SIZE, *fields, *times)
        position += padding + size
    header = HEADER.pack(
        launch_script.encode(),
        MAGIC,
        b"01\0",
        code,
        image_uuid.bytes,
        created,
        created,
        DESCRIPTOR_SLOTS - len(objects),
        DESCRIPTOR_SLOTS,
        DESCRIPTOR_OFFSET,
        len(table),
        data_offset,
        position - data_offset,
    )
    with open(path, "wb") as out:
        out.write(header + bytes(DESCRIPTOR_OFFSET - HEADER_SIZE) + table)
        for blob in (definition, metadata):
            if blob is not None:
                out.write(blob)
        out.write(bytes(paddings[-1]))
        if isinstance(squashfs, bytes):
            out.write(squashfs)
        else:
            with open(squashfs, "rb") as source:
                shutil.copyfileobj(source, out, 1 << 20)
        if out.tell() != position:
            raise OSError(f"{path}: {squashfs!r} changed size while it was copied")

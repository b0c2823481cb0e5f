# SPDX-License-Identifier: MIT
"""mushin_box._image.sif's writer: what it writes, the reader reads back; with the
inputs of tests/golden/siftool-2.8.3.sif it writes siftool 2.8.3's bytes."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import GOLDEN

from mushin_box._image.sif import (
    DESCRIPTOR_SIZE,
    host_arch,
    read_sif_descriptors,
    read_sif_header,
    read_sif_object,
    write_sif,
)

SIFTOOL_SIF = GOLDEN / "siftool-2.8.3.sif"
DEFINITION = b"Bootstrap: debootstrap\nOSVersion: bookworm\n"
METADATA = json.dumps({"data": {"attributes": {"labels": {"k": "v"}}}}).encode()


def test_round_trip_descriptors_offsets_and_arch(tmp_path: Path) -> None:
    fs = tmp_path / "root.squashfs"
    fs.write_bytes(b"hsqs" + bytes(range(256)) * 40)
    sif = tmp_path / "img.sif"
    write_sif(sif, fs, definition=DEFINITION, metadata=METADATA, created=1_700_000_000)
    header = read_sif_header(sif)
    assert header.arch == host_arch() != "unknown"
    assert header.launch_script == "#!/usr/bin/env run-singularity\n"
    assert (header.created, header.modified, header.descriptors_used) == (1_700_000_000,) * 2 + (3,)
    assert header.data_offset + header.data_size == sif.stat().st_size
    deffile, meta, part = read_sif_descriptors(sif)
    assert [d.datatype_name for d in (deffile, meta, part)] == ["Def.FILE", "JSON.Generic", "FS"]
    assert [(d.id, d.group_id, d.linked_id) for d in (deffile, meta, part)] == [
        (1, 1, 0),
        (2, 1, 0),
        (3, 1, 0),
    ]
    assert meta.name == "inspect-metadata.json"
    assert read_sif_object(sif, deffile) == DEFINITION
    assert read_sif_object(sif, meta) == METADATA
    assert part.offset % 4096 == 0 and part.size == fs.stat().st_size
    assert part.size_with_padding - part.size == part.offset - (meta.offset + meta.size)
    assert read_sif_object(sif, part) == fs.read_bytes()
    fstype, parttype, arch = struct.unpack_from("<ii3s", part.extra)
    assert (fstype, parttype, arch) == (1, 2, header.arch_code.encode() + b"\0")


def test_only_the_partition(tmp_path: Path) -> None:
    sif = tmp_path / "fs-only.sif"
    write_sif(sif, b"hsqs" + bytes(100), image_uuid=uuid.UUID(int=0), arch="arm64")
    header = read_sif_header(sif)
    assert header.is_reproducible and header.arch == "arm64" and header.data_offset == 32176
    (part,) = read_sif_descriptors(sif)
    assert (part.id, part.offset, part.size, part.size_with_padding) == (1, 32768, 104, 696)


def test_unknown_arch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown SIF architecture"):
        write_sif(tmp_path / "x.sif", b"", arch="vax")


def test_golden_inputs_give_siftool_bytes(tmp_path: Path) -> None:
    """The golden has a 4th object (a Signature, which this writer does not make): the
    expected file is the golden without it: its slot zeroed, the header's free-slot count
    and data size as for three objects, the file ending where the FS partition does."""
    golden = SIFTOOL_SIF.read_bytes()
    header = read_sif_header(SIFTOOL_SIF)
    deffile, meta, part, sig = read_sif_descriptors(SIFTOOL_SIF)
    assert sig.datatype_name == "Signature" and sig.offset == part.offset + part.size
    out = tmp_path / "copy.sif"
    write_sif(
        out,
        read_sif_object(SIFTOOL_SIF, part),
        definition=read_sif_object(SIFTOOL_SIF, deffile),
        metadata=read_sif_object(SIFTOOL_SIF, meta),
        image_uuid=header.uuid,
        created=header.created,
        arch=header.arch,
        launch_script=header.launch_script,
    )
    want = bytearray(golden[: part.offset + part.size])
    struct.pack_into("<q", want, 64 + 2 * 8, header.descriptors_free + 1)
    struct.pack_into("<q", want, 64 + 7 * 8, part.offset + part.size - header.data_offset)
    slot = header.descriptors_offset + 3 * DESCRIPTOR_SIZE
    want[slot : slot + DESCRIPTOR_SIZE] = bytes(DESCRIPTOR_SIZE)
    assert out.read_bytes() == bytes(want)


@pytest.mark.skipif(shutil.which("mksquashfs") is None, reason="mksquashfs not on PATH")
def test_a_real_squashfs_round_trips(tmp_path: Path) -> None:
    (tmp_path / "root" / "etc").mkdir(parents=True)
    (tmp_path / "root" / "etc" / "os-release").write_text("ID=test\n")
    fs = tmp_path / "root.squashfs"
    argv = ["mksquashfs", str(tmp_path / "root"), str(fs), "-noappend", "-quiet", "-no-progress"]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    sif = tmp_path / "img.sif"
    write_sif(sif, fs)
    (part,) = read_sif_descriptors(sif)
    assert read_sif_object(sif, part)[:4] == b"hsqs" and part.size == fs.stat().st_size

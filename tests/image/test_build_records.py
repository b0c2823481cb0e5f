# SPDX-License-Identifier: MIT
"""What a build records and passes: the package lists in the manifest, ``--force`` for the
spec's labels, the registry-free bases' identity, the SIF reader's extent check, and
spython as an optional dependency.

``apptainer`` here is the build STAND-IN (``tests/standins/apptainer-standin-build``), not
Apptainer: its ``exec`` runs the command on this host, so the "image's" package lists are
this machine's ``dpkg-query`` and this venv's ``pip freeze``. What is checked is that the
build asks for them, through ``apptainer exec``, and records what comes back.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import GOLDEN, REPO, STANDINS
from defparse import every_rendered_definition_parses  # noqa: F401  (autouse: every def parses)

from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.build import (
    DPKG_QUERY,
    UNKNOWN,
    Manifest,
    build_image,
    manifest_path,
    plan_build,
    read_manifest,
)
from mushin_box._image.sif import (
    SIF_ARCHES,
    SifFormatError,
    file_sha256,
    read_sif_descriptors,
    read_sif_header,
)
from mushin_box._image.spec import ImageSpec

STANDIN = STANDINS / "apptainer-standin-build"
SIF = GOLDEN / "siftool-2.8.3.sif"
DIGEST = "sha256:" + "ab" * 32
MIRROR = "http://deb.debian.org/debian"


def _apptainer_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str | None = None
) -> Path:
    """Put the stand-in on PATH as ``apptainer`` (or ``script``, a sh wrapper in front of
    it); return its call log."""
    bindir = tmp_path / "standin-bin"
    bindir.mkdir()
    run = f'exec {shlex.quote(sys.executable)} {shlex.quote(str(STANDIN))} "$@"'
    wrapper = bindir / "apptainer"
    wrapper.write_text(f"#!/bin/sh\n{script or ''}\n{run}\n")
    wrapper.chmod(0o755)
    log = tmp_path / "standin.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("MUSHIN_STANDIN_LOG", str(log))
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    monkeypatch.delenv("MUSHIN_STANDIN_FAIL", raising=False)
    return log


def _spec(**kwargs: Any) -> ImageSpec:
    return ImageSpec(**{"base": "python:3.11@" + DIGEST, "labels": {"a": "b"}, **kwargs})


# --------------------------------------------------------------------------- package lists


def test_the_manifest_records_dpkg_and_pip_lists_from_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _apptainer_on_path(tmp_path, monkeypatch)
    out = tmp_path / "img.sif"
    manifest = build_image(_spec(), out, context=tmp_path)
    execs = [json.loads(line)["argv"] for line in log.read_text().splitlines()][2:]
    image = str(out) + ".partial"
    assert execs[1] == ["exec", "--cleanenv", image, *DPKG_QUERY]
    assert execs[2] == ["exec", "--cleanenv", image, "python", "-I", "-m", "pip", "freeze", "--all"]
    # the stand-in runs them on this host: compare with the host's answers
    if shutil.which("dpkg-query"):
        host = subprocess.run(list(DPKG_QUERY), capture_output=True, text=True, check=True)
        assert manifest.dpkg_packages == tuple(host.stdout.splitlines())
        assert all("=" in line for line in manifest.dpkg_packages)
    else:
        assert manifest.dpkg_packages == UNKNOWN and "dpkg_packages" in (
            manifest.package_list_errors
        )
    assert isinstance(manifest.pip_freeze, tuple)
    assert any(line.startswith("attrs==") for line in manifest.pip_freeze)
    assert "pip_freeze" not in manifest.package_list_errors
    on_disk = json.loads(manifest_path(out).read_text())
    assert on_disk["pip_freeze"] == list(manifest.pip_freeze)
    assert read_manifest(out) == manifest


FAIL_LISTS = """\
for arg in "$@"; do
    case "$arg" in
        dpkg-query|pip) echo "FATAL:   exec: $arg: executable file not found in \\$PATH" >&2
                        exit 127 ;;
    esac
done
"""


def test_an_image_that_cannot_list_its_packages_records_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Alpine or minimal base has no dpkg-query, a base may lack pip: the build goes on
    and says so. (The stand-in itself answers both, from the host: a wrapper in front of it
    fails these two commands as such an image would.)"""
    _apptainer_on_path(tmp_path, monkeypatch, FAIL_LISTS)
    out = tmp_path / "img.sif"
    manifest = build_image(_spec(), out, context=tmp_path)
    assert manifest.sif_sha256 == file_sha256(out)
    assert manifest.dpkg_packages == UNKNOWN and manifest.pip_freeze == UNKNOWN
    errors = manifest.package_list_errors
    assert set(errors) == {"dpkg_packages", "pip_freeze"}
    assert errors["dpkg_packages"].startswith("`dpkg-query -W -f '${Package}=${Version}\\n'` in ")
    assert (
        "exited 127: FATAL: exec: dpkg-query: executable file not found" in errors["dpkg_packages"]
    )
    assert read_manifest(out) == manifest
    assert json.loads(manifest_path(out).read_text())["dpkg_packages"] == "unknown"


def test_old_manifests_without_package_lists_still_load(tmp_path: Path) -> None:
    old = {
        "image": "img.sif",
        "definition": "img.def",
        "definition_sha256": "0" * 64,
        "base_image": "python:3.11@" + DIGEST,
        "base_digest": DIGEST,
        "build_argv": ["apptainer", "build", "img.sif.partial", "img.def.partial"],
        "mushin_box_version": "0.1.0",
        "sif_sha256": "1" * 64,
        "packages": {"attrs": "26.1.0"},
    }
    path = tmp_path / "img.sif.manifest.json"
    path.write_text(json.dumps(old))
    manifest = read_manifest(path)
    assert manifest.dpkg_packages is None and manifest.pip_freeze is None
    assert manifest.package_list_errors == {}
    assert Manifest.from_dict(manifest.to_dict()) == manifest
    with pytest.raises(ValueError, match="expected a list of lines or 'unknown'"):
        Manifest.from_dict({**old, "pip_freeze": "attrs==1"})


# --------------------------------------------------------------------------- labels: --force


def _labels_after_build(
    existing: dict[str, str], spec_labels: dict[str, str], *, force: bool
) -> dict[str, str]:
    """Apptainer's rule for %labels (internal/pkg/build/metadata.go, insertLabelsJSON):
    start from the labels already in the bundle (the base image's, $APPTAINER_LABELS,
    then its own build labels); a %labels key already there replaces it only with force."""
    labels = dict(existing)
    for key, value in spec_labels.items():
        if key not in labels or force:
            labels[key] = value
    return labels


def test_the_build_passes_force_so_the_specs_labels_win() -> None:
    base = {"org.opencontainers.image.title": "python", "maintainer": "upstream"}
    ours = {"org.opencontainers.image.title": "mushin-box", "org.example.kind": "train"}
    dropped = _labels_after_build(base, ours, force=False)
    assert dropped["org.opencontainers.image.title"] == "python"  # ours silently lost
    assert _labels_after_build(base, ours, force=True) == {**base, **ours}
    argv = plan_build(_spec(), "/tmp/x/img.sif", fakeroot=True).argv
    assert argv == (
        "apptainer",
        "build",
        "--fakeroot",
        "--force",
        "/tmp/x/img.sif.partial",
        "/tmp/x/img.def.partial",
    )


# --------------------------------------------------------------------------- bases


def test_a_local_sif_base_is_recorded_by_its_file_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _apptainer_on_path(tmp_path, monkeypatch)
    base = tmp_path / "base.sif"
    shutil.copyfile(SIF, base)
    spec = _spec(base=LocalImage(path=base))
    dry = build_image(spec, tmp_path / "dry.sif", dry_run=True)
    assert dry.base_digest is None and dry.base_image == f"localimage {base}"
    manifest = build_image(spec, tmp_path / "img.sif", context=tmp_path, backend="apptainer")
    assert manifest.base_digest == "sha256:" + file_sha256(base)
    assert manifest.base_image == f"localimage {base}"
    assert (tmp_path / "img.def").read_text().startswith(f"Bootstrap: localimage\nFrom: {base}\n")


def test_a_debootstrap_base_has_no_digest_and_is_pinned_by_its_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _apptainer_on_path(tmp_path, monkeypatch)
    spec = _spec(base=Debootstrap(suite="bookworm", mirror=MIRROR))
    manifest = build_image(spec, tmp_path / "img.sif", context=tmp_path, backend="apptainer")
    assert manifest.backend == "apptainer"
    assert manifest.base_digest is None
    assert manifest.base_image == f"debootstrap bookworm {MIRROR}"
    assert isinstance(manifest.pip_freeze, tuple) and manifest.pip_freeze


# --------------------------------------------------------------------------- SIF extents


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (5 * 1024, "truncated SIF file: wanted 28080 bytes at offset 4096, got 1024"),
        (32200, "truncated SIF file: object 1 (Def.FILE) spans bytes 32176-32344, the file ends"),
        (33000, "truncated SIF file: object 3 (FS) spans bytes 32768-33792, the file ends"),
        (33808, "object 4 (Signature) spans bytes 33792-33809, the file ends at byte 33808"),
    ],
)
def test_every_used_descriptor_must_lie_inside_the_file(
    tmp_path: Path, cut: int, message: str
) -> None:
    """The header reads the same on a cut copy (it is the first 128 bytes): only the
    descriptors' (offset, size) show the file ends early. Extents from siftool-2.8.3.txt."""
    cut_copy = tmp_path / "cut.sif"
    cut_copy.write_bytes(SIF.read_bytes()[:cut])
    assert read_sif_header(cut_copy) == read_sif_header(SIF)
    with pytest.raises(SifFormatError, match=re.escape(message)):
        read_sif_descriptors(cut_copy)
    assert len(read_sif_descriptors(SIF)) == 4  # the whole file


def test_a_descriptor_with_a_negative_extent_is_corrupt(tmp_path: Path) -> None:
    raw = bytearray(SIF.read_bytes())
    header = read_sif_header(SIF)
    struct.pack_into("<q", raw, header.descriptors_offset + 17 + 8, -5)  # object 1's size
    bad = tmp_path / "bad.sif"
    bad.write_bytes(bytes(raw))
    with pytest.raises(SifFormatError, match=r"corrupt SIF: object 1 \(Def.FILE\).*size -5"):
        read_sif_descriptors(bad)


def test_the_arch_table_is_the_sif_librarys() -> None:
    """pkg/sif/arch.go assigns 00 (unknown) to 12 (riscv64) and nothing after: there is no
    SIF code for loong64, whose images carry 00 (getSIFArch's answer for an architecture
    missing from the table), read as "unknown" like any unassigned code."""
    assert SIF_ARCHES == {
        "00": "unknown",
        "01": "386",
        "02": "amd64",
        "03": "arm",
        "04": "arm64",
        "05": "ppc64",
        "06": "ppc64le",
        "07": "mips",
        "08": "mipsle",
        "09": "mips64",
        "10": "mips64le",
        "11": "s390x",
        "12": "riscv64",
    }
    assert "loong64" not in SIF_ARCHES.values()


# --------------------------------------------------------------------------- spython


def test_spython_is_an_optional_extra_of_the_dockerfile_import() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("spython")]
    extras = project["optional-dependencies"]
    assert [d for d in extras["dockerfile"] if d.startswith("spython")]
    # the tests and dev installs have it
    assert any(d.startswith("mushin-box[") and "dockerfile" in d for d in extras["test"])
    code = (
        "import sys, mushin_box, mushin_box._image.spec, mushin_box._image.dockerfile, "
        "mushin_box._image.build, mushin_box.cli.build; "
        "sys.exit('spython' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_without_spython_the_dockerfile_import_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "spython.main.parse.parsers", None)  # import fails
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM python@{DIGEST}\n")
    with pytest.raises(ImportError) as info:
        ImageSpec.from_dockerfile(dockerfile)
    assert str(info.value) == (
        "ImageSpec.from_dockerfile needs spython, an optional dependency: "
        "pip install 'mushin-box[dockerfile]'"
    )

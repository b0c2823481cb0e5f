# SPDX-License-Identifier: MIT
"""``mushin-box build --adopt``: the manifest of an image the kit did not build.

Through the build STAND-IN (tests/standins/apptainer-standin-build, on PATH as
``apptainer``): it answers ``apptainer exec`` by running the command on this host, so the
"image's" Python is this one's. What is checked is that the kit asks the image and writes
what it answers, and that pre-flight then checks the adopted image.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid
from pathlib import Path

import pytest
from conftest import STANDINS

from mushin_box._image.build import manifest_path, read_manifest
from mushin_box._image.sif import file_sha256
from mushin_box.cli.main import main

STANDIN = STANDINS / "apptainer-standin-build"


@pytest.fixture
def site_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SIF built elsewhere (no manifest beside it), and the stand-in on PATH."""
    import runpy

    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "apptainer"
    wrapper.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(STANDIN))} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    image = tmp_path / "site.sif"
    write_sif = runpy.run_path(str(STANDIN))["write_sif"]
    write_sif(
        image,
        [
            {"datatype": 0x4001, "data": b"Bootstrap: docker\nFrom: site/pytorch\n"},
            {"datatype": 0x4004, "data": b"\0" * 4096},  # the FS partition's place
        ],
        image_uuid=uuid.UUID(int=7),
        created=0,
    )
    return image


def test_adopt_writes_what_the_image_says(
    site_image: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not manifest_path(site_image).exists()
    assert main(["build", "--adopt", str(site_image), "--python", sys.executable]) == 0
    manifest = read_manifest(site_image)
    assert manifest.sif_sha256 == file_sha256(site_image)
    assert manifest.python_version == ".".join(map(str, sys.version_info[:3]))
    assert manifest.base_image == "adopted" and manifest.base_digest is None
    assert manifest.definition == "Bootstrap: docker\nFrom: site/pytorch\n"
    assert manifest.packages  # read through `apptainer exec`
    assert str(uuid.UUID(int=7)) == manifest.sif_uuid
    # pre-flight now checks it against its manifest, as a built image
    from mushin_box._container.preflight import preflight

    assert preflight(site_image).verified


def test_an_existing_manifest_is_not_replaced_without_force(
    site_image: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = manifest_path(site_image)
    target.write_text(json.dumps({"the builder's": "record"}))
    capsys.readouterr()
    assert main(["build", "--adopt", str(site_image), "--python", sys.executable]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force" in err and "force=True" not in err
    assert json.loads(target.read_text()) == {"the builder's": "record"}
    assert main(["build", "--adopt", str(site_image), "--python", sys.executable, "--force"]) == 0


def test_a_truncated_image_is_refused_and_nothing_written(
    site_image: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = site_image.read_bytes()
    site_image.write_bytes(data[: len(data) - 100])
    assert main(["build", "--adopt", str(site_image)]) == 2
    assert "truncated" in capsys.readouterr().err
    assert not manifest_path(site_image).exists()

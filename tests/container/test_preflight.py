# SPDX-License-Identifier: MIT
"""Pre-flight of a rank image (mushin_box._container.preflight): the checks before anything is
submitted, and the image identity the env file hands to every rank.

``apptainer`` here is the STAND-IN (``tests/standins/apptainer-standin``) or nothing: the
runtime version it reports ("0.0.0-standin") says nothing about real Apptainer.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import GOLDEN

from mushin_box._container.launchspec import ImageIdentity
from mushin_box._container.preflight import (
    PreflightError,
    PreflightWarning,
    preflight,
    runtime_apptainer_version,
)
from mushin_box._image.build import Manifest, manifest_path
from mushin_box._image.sif import file_sha256


@pytest.fixture
def no_apptainer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A submit host without ``apptainer`` on PATH (a login node, CI)."""
    monkeypatch.setenv("PATH", "/nonexistent")


REAL_SIF = GOLDEN / "siftool-2.8.3.sif"  # written by siftool 2.8.3


def _image_with_manifest(tmp_path: Path, **changes: Any) -> Path:
    image = tmp_path / "train.sif"
    image.write_bytes(REAL_SIF.read_bytes())
    fields: dict[str, Any] = {
        "image": str(image),
        "definition": "Bootstrap: docker\n",
        "definition_sha256": "0" * 64,
        "base_image": "python:3.11",
        "base_digest": "sha256:" + "1" * 64,
        "build_argv": [],
        "mushin_box_version": "0.1.0",
        "sif_sha256": file_sha256(image),
        "python_version": f"{sys.version_info[0]}.{sys.version_info[1]}.4",
        "sif_uuid": "0f0e0d0c-0b0a-4908-8706-050403020100",
    }
    fields.update(changes)
    manifest_path(image).write_text(json.dumps(Manifest(**fields).to_dict()))
    return image


def test_preflight_passes_a_matching_image(tmp_path: Path, no_apptainer: None) -> None:
    image = _image_with_manifest(tmp_path)
    report = preflight(image)
    assert report.verified and report.warnings == ()
    assert report.sif_sha256 == file_sha256(image)
    assert report.image_python == report.submit_python
    assert report.manifest == str(manifest_path(image))


def test_preflight_reports_the_whole_image_identity(
    tmp_path: Path, apptainer_standin: Path
) -> None:
    image = _image_with_manifest(tmp_path)
    identity = preflight(image).identity
    assert identity == ImageIdentity(
        sif_sha256=file_sha256(image),
        sif_uuid="0f0e0d0c-0b0a-4908-8706-050403020100",
        definition_sha256="0" * 64,
        base_digest="sha256:" + "1" * 64,
        apptainer_version="0.0.0-standin",  # `apptainer --version` of this host
    )
    assert list(identity.to_env()) == [
        "MUSHIN_SIF_SHA256",
        "MUSHIN_SIF_UUID",
        "MUSHIN_IMAGE_DEFINITION_SHA256",
        "MUSHIN_IMAGE_BASE_DIGEST",
        "MUSHIN_APPTAINER_VERSION",
    ]


def test_preflight_without_apptainer_on_path_records_no_version(
    tmp_path: Path, no_apptainer: None
) -> None:
    report = preflight(_image_with_manifest(tmp_path))
    assert report.apptainer_version is None and report.warnings == ()
    assert "MUSHIN_APPTAINER_VERSION" not in report.identity.to_env()


def test_a_hung_apptainer_is_bounded_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin" / "apptainer"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}/usr/bin:/bin")
    start = time.monotonic()
    version, why = runtime_apptainer_version(timeout_s=0.5)
    assert time.monotonic() - start < 10
    assert version is None and why is not None and "did not answer within 0.5 s" in why
    fake.write_text("#!/bin/sh\necho broken >&2; exit 3\n")
    version, why = runtime_apptainer_version()
    assert version is None and why is not None and "exit 3" in why and "broken" in why


def test_preflight_missing_image(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match="does not exist: build it with `mushin-box build"):
        preflight(tmp_path / "nope.sif")


def test_preflight_digest_mismatch(tmp_path: Path) -> None:
    image = _image_with_manifest(tmp_path, sif_sha256="f" * 64)
    with pytest.raises(PreflightError, match="changed after its build.*Rebuild it"):
        preflight(image)


def test_preflight_python_mismatch_lists_every_problem(tmp_path: Path) -> None:
    image = _image_with_manifest(tmp_path, sif_sha256="f" * 64, python_version="2.7.18")
    with pytest.raises(PreflightError) as info:
        preflight(image)
    assert len(info.value.problems) == 2
    assert "the image runs Python 2.7" in info.value.problems[1]
    assert "unpickles it in the image" in str(info.value)
    preflight(
        image.with_suffix(".sif"),
        manifest=Manifest.from_dict(
            {
                **json.loads(manifest_path(image).read_text()),
                "sif_sha256": file_sha256(image),
                "python_version": "2.7.18",
            }
        ),
        python_version="2.7",
    )


def test_preflight_without_manifest_records_a_fresh_digest_with_a_warning(
    tmp_path: Path, no_apptainer: None
) -> None:
    image = tmp_path / "bare.sif"
    image.write_bytes(REAL_SIF.read_bytes())
    with pytest.warns(PreflightWarning) as record:
        report = preflight(image)
    messages = [str(w.message) for w in record]
    assert "unverified" in messages[0] and "Python version is unknown" in messages[1]
    assert not report.verified and report.manifest is None and report.image_python is None
    assert report.sif_sha256 == file_sha256(image) and len(report.warnings) == 2
    assert report.identity == ImageIdentity(sif_sha256=file_sha256(image))


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (b"", "an empty file"),
        (b"Bootstrap: docker\nFrom: python:3.11\n", "it starts with b'Bootstrap: docker"),
    ],
    ids=["empty", "text"],
)
@pytest.mark.parametrize("with_manifest", [False, True])
def test_preflight_refuses_what_is_not_a_sif(
    tmp_path: Path, no_apptainer: None, content: bytes, found: str, with_manifest: bool
) -> None:
    """Not even a manifest that matches its bytes makes a text or empty file an image."""
    image = _image_with_manifest(tmp_path) if with_manifest else tmp_path / "train.sif"
    image.write_bytes(content)
    if with_manifest:
        fields = json.loads(manifest_path(image).read_text())
        fields["sif_sha256"] = file_sha256(image)
        manifest_path(image).write_text(json.dumps(fields))
    with pytest.raises(PreflightError) as info:
        preflight(image)
    (problem,) = info.value.problems
    assert problem.startswith(f"image {image} is not a SIF image ({found}"), problem
    assert problem.endswith(f"build it with `mushin-box build SPEC -o {image}`"), problem
    assert "\n" not in problem and image.read_bytes() == content


@pytest.mark.parametrize(
    ("cut", "detail"),
    [
        (100, "wanted 128 bytes at offset 0, got 100"),  # not even a header
        (5 * 1024, "wanted 28080 bytes at offset 4096, got 1024"),  # the descriptor table
        (33000, "object 3 (FS) spans bytes 32768-33792, the file ends at byte 33000"),
        (33800, "object 4 (Signature) spans bytes 33792-33809, the file ends at byte 33800"),
    ],
    ids=["100B", "5KB", "in-FS", "in-signature"],
)
@pytest.mark.parametrize("with_manifest", [False, True])
def test_preflight_refuses_a_truncated_sif(
    tmp_path: Path, no_apptainer: None, cut: int, detail: str, with_manifest: bool
) -> None:
    """A copy cut short has the whole image's 128-byte header: without a manifest its
    digest would be recorded as the image's. Every object the descriptor table lists
    (tests/golden/siftool-2.8.3.txt: the FS at 32768-33792, the signature up to 33809) must
    lie inside the file; with a manifest that matches the cut bytes, still refused."""
    image = _image_with_manifest(tmp_path) if with_manifest else tmp_path / "train.sif"
    image.write_bytes(REAL_SIF.read_bytes()[:cut])
    if with_manifest:
        fields = json.loads(manifest_path(image).read_text())
        fields["sif_sha256"] = file_sha256(image)
        manifest_path(image).write_text(json.dumps(fields))
    with pytest.raises(PreflightError) as info:
        preflight(image)
    (problem,) = info.value.problems
    assert problem == (
        f"image {image} is a truncated SIF image ({detail}): copy it again in full, or "
        f"rebuild it with `mushin-box build SPEC -o {image}`"
    )


def test_preflight_passes_the_whole_sif_without_a_manifest(
    tmp_path: Path, no_apptainer: None
) -> None:
    image = tmp_path / "whole.sif"
    image.write_bytes(REAL_SIF.read_bytes())
    with pytest.warns(PreflightWarning) as record:
        assert preflight(image).sif_size == REAL_SIF.stat().st_size == 33809
    assert "unverified" in str(record[0].message)


def test_preflight_dry_run_or_missing_explicit_manifest(tmp_path: Path) -> None:
    image = _image_with_manifest(tmp_path, sif_sha256=None)
    with pytest.raises(PreflightError, match="records no sif_sha256"):
        preflight(image)
    with pytest.raises(PreflightError, match="does not exist: pass the image's manifest"):
        preflight(image, manifest=tmp_path / "other.manifest.json")


def test_submitit_slurm_config_runs_preflight_before_submitting(
    tmp_path: Path, apptainer_standin: Path
) -> None:
    from mushin_box import submitit_slurm_config

    with pytest.raises(PreflightError, match="does not exist"):
        submitit_slurm_config(nodes=1, gpus_per_node=2, image=tmp_path / "nope.sif")
    image = _image_with_manifest(tmp_path, sif_sha256="f" * 64)
    with pytest.raises(PreflightError, match="changed after its build"):
        submitit_slurm_config(nodes=1, gpus_per_node=2, image=image, working_dir=tmp_path)
    assert not (tmp_path / ".mushin-box").exists()  # nothing written for a refused image
    image = _image_with_manifest(tmp_path)
    cfg = submitit_slurm_config(nodes=1, gpus_per_node=2, image=image, working_dir=tmp_path)
    assert cfg["python"].startswith("apptainer exec --nv --cleanenv --env-file")
    # the batch script's setup lines write the env file; it carries the image's identity
    # (provenance, cell fingerprint), the rank command and its own path to every rank
    script = "\n".join(["set -eu", "SLURM_JOB_ID=7", *cfg["setup"]])
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (env_file,) = (tmp_path / ".mushin-box").iterdir()
    lines = env_file.read_text().splitlines()
    expected = [
        f"MUSHIN_SIF_SHA256={file_sha256(image)}",
        "MUSHIN_SIF_UUID=0f0e0d0c-0b0a-4908-8706-050403020100",
        f"MUSHIN_IMAGE_DEFINITION_SHA256={'0' * 64}",
        f"MUSHIN_IMAGE_BASE_DIGEST=sha256:{'1' * 64}",
        "MUSHIN_APPTAINER_VERSION=0.0.0-standin",
        f"MUSHIN_RANK_COMMAND={shlex.quote(cfg['python'])}",
        f"MUSHIN_ENV_FILE={env_file}",
    ]
    assert [
        line for line in lines if line.split("=", 1)[0] in {e.split("=", 1)[0] for e in expected}
    ] == expected
    assert f"--env-file {env_file} " in cfg["python"]

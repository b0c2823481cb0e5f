# SPDX-License-Identifier: MIT
"""Each rank names its image by digest, and the ranks' images are counted by digest: two
paths to one file are one image; one path whose file was replaced between ranks is two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mushin_box._provenance.compare import diff_records
from mushin_box._provenance.ranks import (
    read_rank_runtimes,
    record_with_rank_runtime,
    write_rank_runtime,
)

A, B = "a" * 64, "b" * 64


def _record(*images: tuple[str, str]) -> dict[str, Any]:
    rows = [
        {"rank": r, "python": "3.11.2", "executable": "/usr/bin/python3", "container": path,
         "sif_sha256": digest}
        for r, (path, digest) in enumerate(images)
    ]  # fmt: skip
    return record_with_rank_runtime({"reproducibility": {}, "run": {}}, rows)


def test_each_rank_records_the_digest_of_its_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPTAINER_CONTAINER", "/images/i.sif")
    monkeypatch.setenv("MUSHIN_SIF_SHA256", A)
    write_rank_runtime(tmp_path, rank=0, attempt=1)
    monkeypatch.setenv("MUSHIN_SIF_SHA256", B)
    write_rank_runtime(tmp_path, rank=1, attempt=1)
    monkeypatch.delenv("APPTAINER_CONTAINER")  # outside an image: no image, no digest
    write_rank_runtime(tmp_path, rank=2, attempt=1)
    rows = read_rank_runtimes(tmp_path, attempt=1)
    assert [r["sif_sha256"] for r in rows] == [A, B, None]
    groups = record_with_rank_runtime({}, rows)["run"]["rank_runtime"]
    assert [(g["ranks"], g["sif_sha256"]) for g in groups] == [([0], A), ([1], B), ([2], None)]


def test_two_paths_to_one_digest_are_one_image() -> None:
    moved = _record(("/a/i.sif", A), ("/b/i.sif", A))
    assert moved["reproducibility"]["ranks"]["images"] == 1
    assert not diff_records(_record(("/a/i.sif", A)), moved).breaks


def test_one_path_with_two_digests_is_two_images_and_breaks_reproducibility() -> None:
    replaced = _record(("/a/i.sif", A), ("/a/i.sif", B))  # the file replaced mid-run
    assert replaced["reproducibility"]["ranks"]["images"] == 2
    groups = replaced["run"]["rank_runtime"]
    assert [(g["ranks"], g["sif_sha256"]) for g in groups] == [([0], A), ([1], B)]
    diff = diff_records(_record(("/a/i.sif", A), ("/a/i.sif", A)), replaced)
    assert [f.path for f in diff.breaks] == ["reproducibility.ranks.images"]

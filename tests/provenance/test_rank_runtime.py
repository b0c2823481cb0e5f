# SPDX-License-Identifier: MIT
"""Every rank records where it ran; diff flags a rank outside the image or in another."""

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


def _rows(*containers: str | None) -> list[dict[str, Any]]:
    return [
        {"rank": r, "python": "3.11.2", "executable": "/usr/bin/python3", "container": c}
        for r, c in enumerate(containers)
    ]


def _record(rows: list[dict[str, Any]] | None) -> dict[str, Any]:
    base = {"reproducibility": {"config": {"lr": 0.1}}, "run": {"host": "n1"}}
    return base if rows is None else record_with_rank_runtime(base, rows)


@pytest.mark.parametrize(
    ("other", "path"),
    [
        (_rows("/i.sif", None, "/i.sif", "/i.sif"), "reproducibility.ranks.in_image"),
        (_rows("/i.sif", "/j.sif", "/i.sif", "/i.sif"), "reproducibility.ranks.images"),
    ],
)
def test_a_rank_outside_the_image_or_in_another_breaks_reproducibility(
    other: list[dict[str, Any]], path: str
) -> None:
    good = _record(_rows("/i.sif", "/i.sif", "/i.sif", "/i.sif"))
    assert not diff_records(good, _record(_rows("/i.sif"))).breaks  # 4 ranks vs 1: same
    assert [f.path for f in diff_records(good, _record(other)).breaks] == [path]


def test_a_rank_on_another_python_breaks_reproducibility() -> None:
    rows = _rows(None, None)
    rows[1]["python"] = "3.11.7"
    diff = diff_records(_record(_rows(None, None)), _record(rows))
    assert [f.path for f in diff.breaks] == ["reproducibility.ranks.python"]


def test_a_record_from_before_rank_runtimes_is_not_a_difference() -> None:
    diff = diff_records(_record(None), _record(_rows("/i.sif")))
    assert not diff.breaks and "reproducibility.ranks" in {f.path for f in diff.expected}


def test_each_rank_writes_its_own_and_only_this_attempt_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPTAINER_CONTAINER", "/images/i.sif")
    monkeypatch.setenv("APPTAINER_NAME", "i.sif")
    write_rank_runtime(tmp_path, rank=1, attempt=2)
    monkeypatch.delenv("APPTAINER_CONTAINER")
    monkeypatch.delenv("APPTAINER_NAME")
    write_rank_runtime(tmp_path, rank=0, attempt=2)
    write_rank_runtime(tmp_path, rank=3, attempt=1)  # an earlier attempt's world
    rows = read_rank_runtimes(tmp_path, attempt=2)
    assert [(r["rank"], r["container"], r["container_name"]) for r in rows] == [
        (0, None, None),
        (1, "/images/i.sif", "i.sif"),
    ]
    record = record_with_rank_runtime({"reproducibility": {}, "run": {}}, rows)
    assert record["reproducibility"]["ranks"]["in_image"] == "some"
    assert [g["ranks"] for g in record["run"]["rank_runtime"]] == [[0], [1]]


def _task(x: float = 1.0) -> dict[str, float]:
    return {"loss": x}


def test_a_cells_record_says_where_its_ranks_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import platform

    from mushin_box import Workflow
    from mushin_box._core.sidecars import read_json

    monkeypatch.setenv("APPTAINER_CONTAINER", "/images/i.sif")  # as inside an image
    Workflow(_task).run(working_dir=tmp_path / "w", x=2.0)
    (record_file,) = (tmp_path / "w").glob("*/mushin_provenance.json")
    record = read_json(record_file)
    assert record["reproducibility"]["ranks"] == {
        "python": [platform.python_version()],
        "in_image": "all",
        "images": 1,
    }
    (only,) = record["run"]["rank_runtime"]
    assert only["ranks"] == [0] and only["container"] == "/images/i.sif"

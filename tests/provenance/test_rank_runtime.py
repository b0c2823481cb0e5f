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


def test_the_records_placements_are_the_ones_the_ranks_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mushin_box._provenance.full import record_with_seeds
    from mushin_box._provenance.topology import topology_from_env

    def slurm_rank(rank: int, node: int, local: int) -> dict[str, str]:
        return {
            "SLURM_PROCID": str(rank),
            "SLURM_NODEID": str(node),
            "SLURM_LOCALID": str(local),
            "SLURM_NTASKS": "3",
            "SLURM_DISTRIBUTION": "arbitrary",  # a layout nothing could guess
            "MUSHIN_JOB_NODES": "n1,n2",
            "SLURMD_NODENAME": f"n{node + 1}",
        }

    world = [slurm_rank(0, 1, 0), slurm_rank(1, 0, 0), slurm_rank(2, 1, 1)]
    for rank, env in enumerate(world):
        with monkeypatch.context() as m:
            for name, value in env.items():
                m.setenv(name, value)
            write_rank_runtime(tmp_path, rank=rank, attempt=0)
    topology = topology_from_env(world[0]).to_dict()
    assert topology["ranks"] == [[0, 0, 1, "n2", None]]  # rank 0 knows only itself
    record = {"reproducibility": {}, "run": {"topology": topology}}
    record = record_with_rank_runtime(record, read_rank_runtimes(tmp_path, attempt=0))
    record = record_with_seeds(record, {r: {"base": 7, "seed": 7 + r} for r in range(3)})
    assert record["run"]["topology"]["ranks"] == [
        [0, 0, 1, "n2", 7],
        [1, 0, 0, "n1", 8],
        [2, 1, 1, "n2", 9],
    ]


def test_every_node_is_named_by_its_ranks_where_the_launch_could_not_expand_the_node_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a rank inside an image: a compressed node list, no scontrol, no MUSHIN_JOB_NODES
    from mushin_box._provenance.topology import topology_from_env

    def slurm_rank(rank: int) -> dict[str, str]:
        node = rank // 2
        return {
            "PATH": str(tmp_path / "no-scontrol"),
            "SLURM_PROCID": str(rank),
            "SLURM_NODEID": str(node),
            "SLURM_LOCALID": str(rank % 2),
            "SLURM_NTASKS": "4",
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "gpu[07-08]",
            "SLURMD_NODENAME": f"gpu0{7 + node}",
        }

    for rank in range(4):
        with monkeypatch.context() as m:
            for name, value in slurm_rank(rank).items():
                m.setenv(name, value)
            write_rank_runtime(tmp_path, rank=rank, attempt=0)
    topology = topology_from_env(slurm_rank(0)).to_dict()
    record = {"reproducibility": {}, "run": {"topology": topology}}
    record = record_with_rank_runtime(record, read_rank_runtimes(tmp_path, attempt=0))
    assert record["run"]["topology"]["nodes"] == ["gpu07", "gpu08"]
    assert record["run"]["topology"]["num_nodes"] == 2
    assert [row[3] for row in record["run"]["topology"]["ranks"]] == ["gpu07"] * 2 + ["gpu08"] * 2

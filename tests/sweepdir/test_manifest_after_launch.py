# SPDX-License-Identifier: MIT
"""The manifest written after a launch is the cells' manifest, whether it is made again
from every cell or only the launched cells' entries are (the reused cells' are kept)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from mushin_box._core.layout import MANIFEST_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._sweepdir import manifest as mf


def _cell(root: Path, name: str, x: int, status: str = "completed", **more: Any) -> None:
    record = {"combo": {"x": x}, "status": status, "attempt": 1, **more}
    write_json_atomic(root / name / STATUS_FILE, record)


def _opened(root: Path) -> tuple[list[Any], dict[str, Any]]:
    """What ``open_sweep`` reads and writes: x=1..3 completed, x=4 failed, x=5, x=6 not run."""
    for x in (1, 2, 3):
        _cell(root, f"x={x}", x)
    _cell(root, "x=4", 4, "failed", error={"type": "ValueError", "message": "bad"})
    records = list(mf.cell_records(root))
    base = mf.write_manifest(root, grid={"x": [1, 2, 3, 4, 5, 6]}, run_id="r1", records=records)
    return records, base


def _without_time(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k != "updated"}


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = mf.rebuild_manifest

    def counted(root: Path, records: Any) -> dict[str, Any]:
        calls.append(1)
        return real(root, records)

    monkeypatch.setattr(mf, "rebuild_manifest", counted)
    return calls


def test_a_resume_that_ran_a_few_cells_updates_their_entries_only(
    tmp_path: Path, rebuilds: list[int]
) -> None:
    records, base = _opened(tmp_path)
    reused = {d.name: r for d, r in records if r["status"] == "completed"}
    _cell(tmp_path, "x=4", 4, reason="ran again")  # the failed cell, run again
    _cell(tmp_path, "x=5", 5, "failed", error={"type": "OSError", "message": "disk"})
    ended, after = mf.finish_launch(tmp_path, None, reused, None, base)
    assert ended == [] and rebuilds == []
    written = read_json(tmp_path / MANIFEST_FILE)
    assert _without_time(written) == _without_time(mf.manifest_from_cells(tmp_path))
    entries = {e["combo"]["x"]: e for e in written["cells"].values()}
    assert (entries[4]["status"], entries[4]["reason"], "error" in entries[4]) == (
        "completed",
        "ran again",
        False,
    )
    assert entries[5]["error"]["type"] == "OSError" and entries[6]["dir"] is None
    assert written["run_id"] == "r1" and written["grid"] == {"x": [1, 2, 3, 4, 5, 6]}


def test_a_directory_gone_or_a_combo_in_two_makes_it_from_every_cell(
    tmp_path: Path, rebuilds: list[int]
) -> None:
    records, base = _opened(tmp_path)
    reused = {d.name: r for d, r in records if r["status"] == "completed"}
    shutil.rmtree(tmp_path / "x=2")  # deleted while the launch ran
    mf.finish_launch(tmp_path, None, reused, None, base)
    assert len(rebuilds) == 1
    written = read_json(tmp_path / MANIFEST_FILE)
    assert _without_time(written) == _without_time(mf.manifest_from_cells(tmp_path))

    records, base = _opened(tmp_path)
    _cell(tmp_path, "x=3-again", 3, "failed")  # a second directory of x=3
    mf.finish_launch(tmp_path, None, {d.name: r for d, r in records}, None, base)
    assert len(rebuilds) == 2
    written = read_json(tmp_path / MANIFEST_FILE)
    assert _without_time(written) == _without_time(mf.manifest_from_cells(tmp_path))


def test_a_manifest_whose_cells_are_no_mapping_is_not_read_as_one(tmp_path: Path) -> None:
    # `resume DIR` asks the manifest which experiment the sweep ran; a hand-edited list of
    # cells there is a manifest to rebuild, said in one warning, not an AttributeError
    _cell(tmp_path, "x=1", 1)
    write_json_atomic(tmp_path / MANIFEST_FILE, {"grid": {"x": [1]}, "cells": ["x=1"]})
    with pytest.warns(UserWarning, match=f"{MANIFEST_FILE}' is not a sweep manifest"):
        assert mf.ran_experiment(tmp_path) is None

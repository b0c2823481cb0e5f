# SPDX-License-Identifier: MIT
"""``ls`` fills its launcher column from what the sweep's files say: the launch record of
``mushin-box launch``, else the jobs file of a mushin launcher's submission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mushin_box._core.sidecars import write_json_atomic
from mushin_box.cli.main import main


def _sweep(root: Path, **files: dict) -> Path:
    write_json_atomic(root / "mushin_sweep.json", {"schema": 1, "grid": {"x": [1]}, "cells": {}})
    write_json_atomic(
        root / "x=1" / "mushin_status.json",
        {"combo": {"x": 1}, "status": "completed", "attempt": 1},
    )
    for name, data in files.items():
        write_json_atomic(root / name, data)
    return root


def test_the_launcher_column_is_filled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(tmp_path / "a", **{"mushin_launch.json": {"launcher": "basic", "flags": {}}})
    _sweep(tmp_path / "b", **{"mushin_jobs.json": {"cluster": "slurm", "jobs": []}})
    _sweep(tmp_path / "c")  # Workflow.run's basic launcher leaves no trace: unknown
    assert main(["ls", str(tmp_path), "--json"]) == 0
    rows = {row["sweep"]: row["launcher"] for row in json.loads(capsys.readouterr().out)}
    assert rows == {"a": "basic", "b": "mushin_slurm", "c": None}
    assert main(["ls", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "mushin_slurm" in table and "basic" in table


def test_ls_of_a_sweep_names_it_as_given_and_reproduce_points_to_its_cell_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = _sweep(tmp_path / "a", **{"mushin_launch.json": {"launcher": "basic", "flags": {}}})
    assert main(["ls", str(sweep), "--json"]) == 0
    assert [row["sweep"] for row in json.loads(capsys.readouterr().out)] == [str(sweep)]  # not .
    assert main(["reproduce", str(sweep)]) == 2
    said = capsys.readouterr().err
    assert f"`mushin-box status {sweep}` lists them" in said  # its cells: ls lists sweeps
    assert main(["status", str(sweep)]) == 0 and "1 completed" in capsys.readouterr().out

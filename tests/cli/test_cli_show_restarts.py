# SPDX-License-Identifier: MIT
"""``show`` says which cells torchrun restarted (issue 43, item 4): a ``restarts`` column,
only when a cell restarted, and ``restarts`` in every ``--json`` row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mushin_box import Workflow, multirun
from mushin_box.cli.main import main


def task(x: int = 1) -> dict[str, float]:
    return {"y": float(x)}


def test_show_names_the_restarts_of_a_restarted_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Workflow(task).run(working_dir=tmp_path / "plain", progress=False, x=multirun([1, 2]))
    # the cells of a torchrun worker group restarted once, with 1 restart left
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")
    Workflow(task).run(working_dir=tmp_path / "again", progress=False, x=multirun([1, 2]))
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()

    assert main(["show", str(tmp_path / "plain")]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if " state " in line)
    assert "restarts" not in header  # no column when nothing restarted
    assert main(["show", str(tmp_path / "again")]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if " state " in line)
    assert [w for w in header.split() if w.isalpha()] == ["x", "state", "restarts", "y"]
    assert sum("after 1 restart (1 left)" in line for line in out) == 2, out
    assert main(["show", str(tmp_path / "again"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["cells"]
    assert [r["restarts"] for r in rows] == [1, 1]

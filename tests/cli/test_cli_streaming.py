# SPDX-License-Identifier: MIT
"""``status`` and ``show`` of a finished sweep say its first line before they read its
cells (issue 32): the manifest knows every cell's state, so the counts are printed at once,
and a 10,000-cell table follows when its cells are read."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from many_cells import many_cells

import mushin_box._sweepdir.board as board
import mushin_box._sweepdir.manifest as manifest
import mushin_box._sweepdir.settled as settled
from mushin_box._core.layout import STATUS_FILE
from mushin_box.cli.main import main


def _finished_an_hour_ago(root: Path) -> Path:
    """The sweep's status files older than its manifest by an hour (as when the last cell
    ended well before the driver wrote the manifest): the manifest answers for them."""
    hour_ago = time.time() - 3600
    for status in root.glob(f"*/{STATUS_FILE}"):
        os.utime(status, (hour_ago, hour_ago))
    return root


def _spy(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    module: Any,
    name: str,
) -> list[str]:
    """What had been printed each time ``module.name`` (a cell's file read) was called."""
    printed: list[str] = []
    seen: list[str] = []
    real = getattr(module, name)

    def reading(*args: Any, **kwargs: Any) -> Any:
        printed.append(capsys.readouterr().out)
        seen.append("".join(printed))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, reading)
    return seen


@pytest.mark.parametrize("argv", [["status"], ["show"]])
def test_the_first_line_is_printed_before_a_cell_is_read(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    sweep = _finished_an_hour_ago(many_cells(tmp_path / "sweep", 8, 14))
    if argv[0] == "status":  # each cell's status record: its node, duration, job
        seen = _spy(monkeypatch, capsys, settled, "read_status")
    else:  # each completed cell's metrics
        seen = _spy(monkeypatch, capsys, board, "read_json")
    assert main([argv[0], str(sweep), *argv[1:]]) == 0
    out = "".join([seen[-1] if seen else "", capsys.readouterr().out])
    first = f"{sweep}: 112 completed"
    assert len(seen) == 112  # every cell read once, each after the first line
    assert seen[0] == first + "\n"
    assert out.splitlines()[0] == first and out.count(first) == 1  # said once
    assert len(out.splitlines()) > 112


def test_show_with_an_option_the_cells_must_answer_prints_once_they_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a --best naming no metric is one line on stderr and nothing on stdout: so its
    # heading waits for the cells
    sweep = _finished_an_hour_ago(many_cells(tmp_path / "sweep", 2, 3))
    seen = _spy(monkeypatch, capsys, board, "read_json")
    assert main(["show", str(sweep), "--best", "loss"]) == 0
    assert seen and seen[-1] == ""
    assert capsys.readouterr().out.splitlines()[0] == f"{sweep}: 6 completed"


def test_a_sweep_the_manifest_cannot_answer_is_printed_whole_once_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = many_cells(tmp_path / "sweep", 2, 3)
    (sweep / "mushin_sweep.json").unlink()  # no manifest: every status file is read first
    seen = _spy(monkeypatch, capsys, manifest, "read_status")
    assert main(["status", str(sweep)]) == 0
    assert seen and seen[-1] == ""  # nothing printed before the last cell was read
    assert capsys.readouterr().out.splitlines()[0] == f"{sweep}: 6 completed"

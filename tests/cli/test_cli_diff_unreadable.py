# SPDX-License-Identifier: MIT
"""``diff`` of two sweeps where one has a cell it cannot read (a status refused or
unreadable, e.g. no permission): the cell is unreadable there, not "only in A" (issue 42,
case 11)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sweep_files import write_cell, write_manifest

from mushin_box.cli.main import main


def _sweep(root: Path) -> Path:
    cells = [write_cell(root, {"a": a}, metrics={"y": float(a)}) for a in (1, 2)]
    write_manifest(root, {"a": [1, 2]}, cells)
    return root


def test_a_cell_unreadable_in_b_is_not_only_in_a(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _sweep(tmp_path / "a"), _sweep(tmp_path / "b")
    status = b / "a=1" / "mushin_status.json"
    status.unlink()
    os.mkfifo(status)  # refused unread, as a status that cannot be opened is
    capsys.readouterr()
    with pytest.warns(UserWarning, match="not a regular file"):
        assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "different experiments: 1 cell unreadable in B\n" in out, out
    assert "only in" not in out and "\n  1 cell unreadable in B: a=1\n" in out, out

# SPDX-License-Identifier: MIT
"""``show`` of a sweep of more rows than a rich table holds (issue 32): one aligned line per
cell, the best marked, plain text into a pipe."""

from __future__ import annotations

from pathlib import Path

import pytest
from many_cells import many_cells

from mushin_box.cli.main import main


def test_a_long_sweep_is_one_aligned_line_per_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = many_cells(tmp_path / "sweep", 8, 14)
    assert main(["show", str(sweep), "--best", "loss"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # a pipe gets no terminal styles
    lines = out.splitlines()
    assert lines[0] == f"{sweep}: 112 completed"
    header, rows = lines[1], lines[2:114]
    assert header.split() == ["a", "b", "state", "loss"]
    at = header.index("state")
    assert all(row[at:].startswith("completed") for row in rows)
    assert [row.split()[:2] for row in rows[:2]] == [["0", "0"], ["0", "1"]]  # grid order
    best = [row for row in rows if row.startswith("★")]
    assert len(best) == 1 and best[0].split()[1:3] == ["3", "5"]
    assert lines[-1] == "★ best loss (lowest): a=3,b=5 = 0.5"

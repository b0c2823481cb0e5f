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


def test_on_a_colour_terminal_states_are_coloured_and_the_best_line_bold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = many_cells(tmp_path / "sweep", 8, 14)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich's way to say: a colour terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["show", str(sweep), "--best", "loss"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = lines[2:114]  # below the heading and the header
    assert all("\x1b[32mcompleted\x1b[39m" in row for row in rows)
    (best,) = [row for row in rows if "★" in row]
    assert best.startswith("\x1b[1m") and best.endswith("\x1b[0m")  # bold to its end

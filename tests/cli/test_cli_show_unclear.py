# SPDX-License-Identifier: MIT
"""Two of ``show``'s unclear answers (issue 42, case 11): ``--best m:max`` with cells at
``+inf`` said "no cell has a value" (they have one, not finite, so never the best), and
``--where "a='unterminated"`` printed an empty table, exit 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_files import write_cell, write_manifest

from mushin_box.cli.main import main

INF = float("inf")


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    root = tmp_path / "sweep"
    values = {1: INF, 2: INF, 3: 1.0}
    cells = [write_cell(root, {"a": a}, metrics={"m": m}) for a, m in values.items()]
    write_manifest(root, {"a": [1, 2, 3]}, cells)
    return root


def _out(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> str:
    capsys.readouterr()
    assert main(list(argv)) == code
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_best_says_which_cells_were_not_finite(
    sweep: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = _out(capsys, "show", str(sweep), "--best", "m:max", "--where", "a=1,2").splitlines()[-1]
    assert line == "best m (highest): no cell has a finite value (2 at inf or nan left out)"
    line = _out(capsys, "show", str(sweep), "--best", "m:max").splitlines()[-1]
    assert line.endswith("best m (highest): a=3 = 1 (2 at inf or nan left out)"), line
    assert _out(capsys, "report", str(sweep), "--best", "m:max", "-o", str(tmp_path / "r.html"))
    assert "(2 at inf or nan left out)" in (tmp_path / "r.html").read_text()


def test_an_unterminated_quote_in_where_is_one_line_and_exit_2(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (line,) = _out(capsys, "show", str(sweep), "--where", "a='unterminated", code=2).splitlines()
    assert 'a quote in "\'unterminated" is not closed' in line, line
    assert "a=2" in _out(capsys, "show", str(sweep), "--where", "a='2'", "--csv")


def test_a_value_with_an_apostrophe_inside_is_taken_as_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only a quote that opens the value and is not closed is refused: ``it's`` is a value."""
    root = tmp_path / "sweep"
    cells = [write_cell(root, {"d": d}, metrics={"m": 1.0}) for d in ("it's", "other")]
    write_manifest(root, {"d": ["it's", "other"]}, cells)
    out = _out(capsys, "show", str(root), "--where", "d=it's", "--csv")
    assert "it's" in out and "other" not in out, out

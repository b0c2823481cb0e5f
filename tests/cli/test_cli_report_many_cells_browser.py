# SPDX-License-Identifier: MIT
"""The report of a sweep of a few hundred cells, with the table and curve limits lowered
(``--rows``, ``--curves``) as they apply past 500 and 20 cells, opened in headless Chromium
(issue 32 item 2): it renders, fetches nothing, and shows the best rows, the best curves
and one band. How long a 10,000-cell page takes to open is measured in scripts/bench/, not
here."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import ReportPage, browse, chromium
from many_cells import many_cells

from mushin_box.cli.main import main


@pytest.mark.slow
def test_a_report_of_hundreds_of_cells_opens_with_the_best_rows_curves_and_a_band(
    tmp_path: Path,
) -> None:
    chromium()
    sweep = many_cells(tmp_path / "sweep", 15, 20)
    argv = ["report", str(sweep), "--best", "loss", "--rows", "25", "--curves", "6"]
    assert main(argv) == 0
    dom, requested = browse(sweep / "report.html", tmp_path, "--dump-dom")
    assert requested == [], requested
    page = ReportPage()
    page.feed(dom)
    assert len(page.rows) == 25 and page.rows[0][0] == "best cell"
    assert page.rows[0][1][1] == "a=3,b=5"
    assert [len(curves) for curves in page.plots.values()] == [6]
    assert dom.count('<path class="band"') == 2  # in the linear and the log variant
    assert 'download="cells.csv"' in dom and "300 cells: the table shows the best 25" in dom


def test_rows_and_curves_must_be_whole_numbers_from_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = many_cells(tmp_path / "sweep", 2, 2)
    for flag, value in (("--rows", "0"), ("--curves", "x")):
        with pytest.raises(SystemExit) as exit_:
            main(["report", str(sweep), flag, value])
        assert exit_.value.code == 2
        assert f"{value!r} is not a whole number from 1" in capsys.readouterr().err
    assert not (sweep / "report.html").exists()

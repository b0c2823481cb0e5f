# SPDX-License-Identifier: MIT
"""The report of a sweep with more cells than it shows (issue 32 item 2): the best rows,
every row in a CSV inside the page, the best cells' curves and a band for the rest."""

from __future__ import annotations

import base64
import csv
import io
import re
from pathlib import Path

from many_cells import many_cells

from mushin_box._results.report import render_report


def test_past_rows_cells_the_table_shows_the_best_and_the_page_holds_every_row(
    tmp_path: Path,
) -> None:
    root = many_cells(tmp_path / "s", 12, 12)
    page = render_report(root, best="loss", rows=10, curves=4)
    shown = re.findall(r'<tr class="(?:best cell|cell)"><td>[^<]*</td><td>([^<]+)</td>', page)
    assert len(shown) == 10 and shown[0] == "a=3,b=5"
    assert "144 cells: the table shows the best 10 by loss" in page
    link = re.search(
        r'<a class="csv" download="cells.csv" href="data:text/csv;[^,]*,([^"]+)"', page
    )
    assert link is not None
    rows = list(csv.DictReader(io.StringIO(base64.b64decode(link.group(1)).decode())))
    assert len(rows) == 144 and {r["dir"] for r in rows} == {
        f"a={i},b={j}" for i in range(12) for j in range(12)
    }
    assert [r["dir"] for r in rows if r["best"] == "True"] == ["a=3,b=5"]
    # still one page that fetches nothing: the CSV is in it
    assert re.findall(r'\b(?:src|href)="([a-z]+):', page) == ["data"]


def test_past_curves_cells_each_plot_draws_the_best_and_a_band_for_the_rest(
    tmp_path: Path,
) -> None:
    root = many_cells(tmp_path / "s", 6, 8)
    page = render_report(root, best="loss", curves=5)
    (figure,) = re.findall(r'<figure class="plot" data-metric="fit.loss".*?</figure>', page)
    shown = re.search(r"<svg .*?</svg>", figure)
    assert shown is not None
    cells = re.findall(r'<path class="curve" data-cell="([^"]+)"', shown.group(0))
    assert len(cells) == 5 and "a=3 b=5" in cells
    assert shown.group(0).count('<path class="band"') == 1
    assert "the other 43 cells: lowest to highest" in figure
    # fewer cells than that: every curve, no band
    small = render_report(root, best="loss", curves=48)
    assert '<path class="band"' not in small

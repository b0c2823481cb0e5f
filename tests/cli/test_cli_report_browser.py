# SPDX-License-Identifier: MIT
"""The report of a 2 × 2 sweep whose losses live only in the series, one cell diverging,
opened in headless Chromium (issue 31, item 5): the plots open on a log axis and show it
(read back from the screenshot's pixels), the best cell is bold and the others faded, and
``--against``'s curves are overlaid, dashed. The page and its screenshot are kept in the
sweep directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import ReportPage, browse, chromium, png_pixels
from sweep_files import grid_sweep

from mushin_box._results.markup import color
from mushin_box.cli.main import main

BEST = "hidden=64 lr=0.1"  # the lowest val_loss any epoch reached (0.05)
BEST_INDEX = 2  # its row in grid order: its colour in every plot


@pytest.mark.slow
def test_the_report_draws_a_log_axis_the_best_cell_bold_and_the_overlay(tmp_path: Path) -> None:
    chromium()
    sweep, other = grid_sweep(tmp_path / "mine"), grid_sweep(tmp_path / "other", shift=0.02)
    assert main(["report", str(sweep), "--best", "val_loss@min", "--against", str(other)]) == 0
    report = sweep / "report.html"  # the default: beside the sweep it describes
    dom, requested = browse(report, tmp_path, "--dump-dom")
    assert requested == [], requested
    page = ReportPage()
    page.feed(dom)
    for metric in ("fit.val_loss", "fit.train_loss"):
        # 0.05 .. 10000: a log axis by default, the linear one a toggle away
        assert page.scales[metric] == "log" and page.toggles[metric] is True
        own = [p for p in page.paths[metric] if p["class"] == "curve"]
        theirs = [p for p in page.paths[metric] if p["class"] == "curve against"]
        widths = {p["data-cell"]: (p["stroke-width"], p["stroke-opacity"]) for p in own}
        assert widths.pop(BEST) == ("3.5", "1")
        assert len(widths) == 3 and set(widths.values()) == {("1.5", "0.3")}
        assert [p["data-sweep"] for p in theirs] == ["other"] * 4
        assert all(p.get("stroke-dasharray") for p in theirs)
        assert {p["stroke"] for p in theirs} == {p["stroke"] for p in own}
    shot = sweep / "report.png"
    _, requested = browse(report, tmp_path, f"--screenshot={shot}", "--window-size=1000,1300")
    assert requested == []
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1000, 1300)
    # the best curve falls from 1.0 to 0.05 among values up to 10000: on the log axis the
    # browser shows, it spans ~50 px of each plot; on a linear one it would lie flat on
    # the bottom line (and a hidden plot shows none of it)
    best = bytes.fromhex(color(BEST_INDEX)[1:])
    lines_with_best = [y for y, row in enumerate(rows) if _has(row, best)]
    assert len(lines_with_best) > 30, lines_with_best


def _has(row: bytes, rgb: bytes) -> bool:
    at = row.find(rgb)
    while at != -1:
        if at % 3 == 0:
            return True
        at = row.find(rgb, at + 1)
    return False

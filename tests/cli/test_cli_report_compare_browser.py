# SPDX-License-Identifier: MIT
"""The report's comparison view laid out by headless Chromium (issue 43, item 5): the
heatmap's row label and its first column header do not overlap, the overlay's legend has
one entry per pair of curves (a cell and its counterpart in ``--against``), and the plots
span the page. Positions are the browser's own (``getBoundingClientRect``), read by a
script added to a copy of the page (the report itself runs no script: its
Content-Security-Policy forbids one); the copy's screenshot is kept beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import browse, chromium, png_pixels
from sweep_files import write_cell, write_manifest

from mushin_box.cli.main import main

#: what the script added to the copy writes into the page: the boxes the test checks
_MEASURE = """<script>
const box = (e) => { const r = e.getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom]; };
const heat = document.querySelector("figure.heatmap svg");
const fig = document.querySelector("figure.plot");
const legend = [...fig.querySelectorAll(".legend > span")].filter((e) => e.offsetWidth > 0);
const text = (t) => [...heat.querySelectorAll("text")].find((e) => e.textContent === t);
const plot = [...fig.querySelectorAll("svg")].find((e) => e.getBoundingClientRect().width > 0);
const out = {
  ylabel: box(text("block.depth")), header: box(text("0.001")),
  legend: legend.map((e) => [e.textContent, e.dataset.color]),
  body: box(document.body), plot: box(plot),
};
const pre = document.createElement("pre"); pre.id = "measured";
pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
</script>"""


def _spread(root: Path) -> Path:
    values = iter((0.0028, 0.003, 0.0033, 0.0036, 0.004, 0.0045, 0.005, 0.0058, 0.05))
    grid = {"block.depth": [1, 2, 3], "lr": [0.001, 0.01, 0.1]}
    cells = [
        write_cell(
            root,
            {"block.depth": d, "lr": lr},
            metrics={"val_loss": (v := next(values))},
            series={"val_loss": [1.0, 0.1, v]},
        )
        for d in grid["block.depth"]
        for lr in grid["lr"]
    ]
    write_manifest(root, grid, cells)
    return root


@pytest.mark.slow
def test_the_heatmap_labels_apart_and_one_legend_entry_per_pair(tmp_path: Path) -> None:
    chromium()
    sweep, other = _spread(tmp_path / "mine"), _spread(tmp_path / "other")
    assert main(["report", str(sweep), "--best", "val_loss", "--against", str(other)]) == 0
    html = (sweep / "report.html").read_text()
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    copy = sweep / "measured.html"
    copy.write_text(html.replace("</body>", _MEASURE + "</body>"))
    dom, _ = browse(copy, tmp_path, "--dump-dom", "--window-size=1280,2000")
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom)
    assert found is not None, dom[-2000:]
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    (left, top, right, bottom), header = measured["ylabel"], measured["header"]
    apart = right <= header[0] or header[2] <= left or bottom <= header[1] or header[3] <= top
    assert apart, measured
    # 9 pairs: 9 entries, each naming both sweeps, each in its own colour
    entries = measured["legend"]
    assert len(entries) == 9, entries
    assert all("(solid: mine, dashed: other)" in text for text, _ in entries), entries
    assert len({colour for _, colour in entries}) == 9
    # the plot spans the page's text column (not a third of it)
    body, plot = measured["body"], measured["plot"]
    assert plot[2] - plot[0] > 0.9 * (body[2] - body[0]), measured
    shot = sweep / "measured.png"
    browse(copy, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    width, _, _ = png_pixels(shot.read_bytes())
    assert width == 1280

# SPDX-License-Identifier: MIT
"""The report's comparison view (issue 43, item 5): ``--where`` filters ``--against``'s
curves and the reproducibility diff too; a cell's curve and its counterpart's share one
colour and one legend entry, and are highlighted together when the cell is the best; plots
use the page width; the heatmap's labels do not overlap, and its colours show the spread
of values that span orders of magnitude. The browser test is
tests/cli/test_cli_report_compare_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

from sweep_files import grid_sweep, write_cell, write_manifest

from mushin_box._results.report import render_report

#: a 3 × 3 grid whose values span 0.0028 to 0.050, eight of them below 0.006
SPREAD = (0.0028, 0.003, 0.0033, 0.0036, 0.004, 0.0045, 0.005, 0.0058, 0.05)


def against_pair(tmp_path: Path) -> tuple[Path, Path]:
    """``mine`` (2 × 2) and ``other``: the same grid shifted, and one cell only it has."""
    mine, other = grid_sweep(tmp_path / "mine"), grid_sweep(tmp_path / "other", shift=0.02)
    series = {"val_loss": [3.0, 2.0, 1.0, 0.5], "train_loss": [3.0, 2.0, 1.0, 0.5]}
    write_cell(other, {"hidden": 128, "lr": 1.0}, metrics={"done": 1.0}, series=series)
    return mine, other


def curves(page: str, metric: str = "fit.val_loss") -> list[dict[str, str]]:
    """The curves of the plot's first SVG, each path's attributes."""
    fig = re.search(rf'<figure class="plot" data-metric="{metric}".*?</svg>', page)
    assert fig is not None
    paths = re.findall(r'<path (class="curve[^"]*"[^>]*)>', fig.group(0))
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', p)) for p in paths]


def legend(page: str, metric: str = "fit.val_loss") -> list[tuple[str, str]]:
    """The legend's entries: (colour, text)."""
    fig = re.search(rf'<figure class="plot" data-metric="{metric}".*?</figure>', page)
    assert fig is not None
    box = re.search(r'<div class="legend">(.*?)</div>', fig.group(0))
    assert box is not None
    entries = re.findall(
        r'<span class="entry[^"]*" data-color="([^"]+)">(.*?)</span>(?=<span class="entry|$)',
        box.group(1),
    )
    return [(c, re.sub(r"<[^>]+>", "", text)) for c, text in entries]


def test_where_filters_the_overlay_and_the_reproducibility_diff(tmp_path: Path) -> None:
    mine, other = against_pair(tmp_path)
    page = render_report(mine, against=other, where=["lr=0.1"])
    drawn = curves(page)
    assert sorted(p["data-cell"] for p in drawn if p["class"] == "curve") == [
        "hidden=16",
        "hidden=64",
    ]
    # the counterparts of the filtered cells only: not lr=1.0's, nor the cell only B has
    assert sorted(p["data-cell"] for p in drawn if p["class"] == "curve against") == [
        "hidden=16",
        "hidden=64",
    ]
    diff = page[page.index("<h2>Reproducibility diff</h2>") :]
    assert "lr=1.0" not in diff and "only in B" not in diff, diff
    assert "same experiment, same results" in diff
    # without the filter, every cell of both, and the cell only in B
    whole = render_report(mine, against=other)
    assert len([p for p in curves(whole) if p["class"] == "curve against"]) == 5
    assert "1 cell only in B: hidden=128,lr=1.0" in whole


def test_a_cell_and_its_counterpart_share_a_colour_and_one_legend_entry(tmp_path: Path) -> None:
    mine, other = against_pair(tmp_path)
    page = render_report(mine, against=other)
    drawn = curves(page)
    entries = legend(page)
    # 4 pairs and the cell only in B: 5 entries, one per pair, none for the dashed lines alone
    assert len(entries) == 5, entries
    texts = dict((text, colour) for colour, text in entries)
    assert len(set(texts.values())) == 5  # a colour per pair
    for h in (16, 64):
        for lr in (0.1, 1.0):
            cell = f"hidden={h} lr={lr}"
            colour = texts[f"{cell} (solid: mine, dashed: other)"]
            strokes = {p["class"]: p["stroke"] for p in drawn if p["data-cell"] == cell}
            assert strokes == {"curve": colour, "curve against": colour}
    only = [p for p in drawn if p["data-cell"] == "hidden=128 lr=1.0"]
    assert [p["class"] for p in only] == ["curve against"]
    assert texts["hidden=128 lr=1.0 (dashed: other)"] == only[0]["stroke"]


def test_the_best_cell_and_its_counterpart_are_highlighted_together(tmp_path: Path) -> None:
    mine, other = against_pair(tmp_path)
    page = render_report(mine, against=other, best="val_loss@min")
    styles = {
        (p["class"], p["data-cell"]): (p["stroke-width"], p["stroke-opacity"]) for p in curves(page)
    }
    best = "hidden=64 lr=0.1"
    assert styles.pop(("curve", best)) == ("3.5", "1")
    assert styles.pop(("curve against", best)) == ("3.5", "1")
    assert set(styles.values()) == {("1.5", "0.3")}
    bold = [text for _, text in legend(page) if text.startswith(best)]
    assert bold and re.search(
        r'<span class="entry best" data-color="[^"]+">(<span [^>]*></span>)*' + best, page
    )


def test_plots_use_the_page_width(tmp_path: Path) -> None:
    page = render_report(grid_sweep(tmp_path / "g"))
    svgs = re.findall(r"<figure class=\"plot\".*?(<svg [^>]*>)", page)
    assert svgs
    for svg in svgs:
        assert 'width="100%"' in svg, svg
        view = re.search(r'viewBox="0 0 (\d+) (\d+)"', svg)
        assert view is not None and int(view.group(1)) >= 960
    # one plot per row, the whole width of the page (not two or three side by side)
    assert re.search(r"figure\.plot \{[^}]*width: 100%", page)
    assert re.search(r"\.legend \{[^}]*max-width: none", page)


def spread_sweep(root: Path) -> Path:
    values = iter(SPREAD)
    cells = [
        write_cell(root, {"block.depth": d, "lr": lr}, metrics={"val_loss": next(values)})
        for d in (1, 2, 3)
        for lr in (0.001, 0.01, 0.1)
    ]
    write_manifest(root, {"block.depth": [1, 2, 3], "lr": [0.001, 0.01, 0.1]}, cells)
    return root


def heatmap(page: str) -> str:
    found = re.search(r'<figure class="heatmap".*?</figure>', page)
    assert found is not None
    return found.group(0)


def text_box(svg: str, text: str, size: float = 12.0) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the ``<text>`` holding ``text``, its width estimated
    generously (0.65 em a character: bold sans-serif digits and letters are narrower)."""
    found = re.search(rf"<text ([^>]*)>{re.escape(text)}</text>", svg)
    assert found is not None, text
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', found.group(1)))
    x, y, width = float(attrs["x"]), float(attrs["y"]), 0.65 * size * len(text)
    anchor = attrs.get("text-anchor", "start")
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, y - size, left + width, y + 0.25 * size


def test_the_heatmaps_row_label_does_not_overlap_the_first_column_header(tmp_path: Path) -> None:
    svg = heatmap(render_report(spread_sweep(tmp_path / "s")))
    label, header = text_box(svg, "block.depth"), text_box(svg, "0.001")
    apart = label[2] <= header[0] or header[2] <= label[0]
    above = label[3] <= header[1] or header[3] <= label[1]
    assert apart or above, (label, header)
    assert label[0] >= 0  # not pushed off the picture


def _rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


def test_the_heatmaps_colours_show_the_spread_across_orders_of_magnitude(tmp_path: Path) -> None:
    svg = heatmap(render_report(spread_sweep(tmp_path / "s")))
    fills = {
        float(v): _rgb(f)
        for f, v in re.findall(
            r'class="heat" [^>]*fill="(#[0-9a-f]{6})"[^>]*data-value="([^"]+)"', svg
        )
    }
    assert sorted(fills) == list(SPREAD)
    # every square tells apart from every other: not 8 of 9 in the darkest colour
    for a in fills:
        for b in fills:
            if a < b:
                distance = sum((x - y) ** 2 for x, y in zip(fills[a], fills[b], strict=True))
                assert distance**0.5 > 25, (a, b, fills[a], fills[b])
    assert "colour by rank" in svg  # the legend says how the colours were chosen
